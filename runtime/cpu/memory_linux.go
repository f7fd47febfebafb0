package cpu

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Available returns how many bytes of fresh memory this process can still
// get, and what bounds it: the least of the machine's available memory
// (MemAvailable and free swap in /proc/meminfo), the headroom of every
// memory cgroup the process is in (limit minus usage, v2 and v1), and the
// room left under RLIMIT_AS. Past it, a mapping either fails or, where the
// kernel overcommits, succeeds and gets the process killed when its pages
// are touched; NewBuffer refuses such sizes up front. math.MaxInt64 means
// nothing bounds it that this can read.
func Available() (int64, string) {
	avail, from := int64(math.MaxInt64), ""
	take := func(n int64, source string) {
		if n >= 0 && n < avail {
			avail, from = n, source
		}
	}
	if info := readKeyed("/proc/meminfo"); info != nil {
		if n, ok := info["MemAvailable"]; ok {
			take(n+info["SwapFree"], "the machine's available memory and free swap (/proc/meminfo)")
		}
	}
	for _, dir := range cgroupDirs() {
		if limit, used, ok := cgroupUsage(dir); ok {
			take(max(limit-used, 0), "the memory cgroup's limit less its usage ("+dir+")")
		}
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &rl) == nil && rl.Cur < math.MaxInt64 {
		if status := readKeyed("/proc/self/status"); status != nil {
			take(max(int64(rl.Cur)-status["VmSize"], 0), "the address-space limit (RLIMIT_AS, ulimit -v) less the process's size")
		}
	}
	return avail, from
}

// readKeyed reads a "Key: N [kB]" file (/proc/meminfo, /proc/self/status)
// into bytes per key; nil when it cannot be read.
func readKeyed(path string) map[string]int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(rest)
		if !ok || len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 1 && fields[1] == "kB" {
			n <<= 10
		}
		out[key] = n
	}
	return out
}

// cgroupDirs are the memory cgroup folders the process is in, its own and
// each above it (a limit on any of them applies): cgroup v2's unified
// hierarchy and v1's memory controller, as /proc/self/cgroup names them.
func cgroupDirs() []string {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		root := ""
		switch {
		case parts[0] == "0" && parts[1] == "":
			root = "/sys/fs/cgroup"
		case strings.Contains(","+parts[1]+",", ",memory,"):
			root = "/sys/fs/cgroup/memory"
		default:
			continue
		}
		for p := filepath.Clean("/" + parts[2]); ; p = filepath.Dir(p) {
			dirs = append(dirs, filepath.Join(root, p))
			if p == "/" {
				break
			}
		}
	}
	return dirs
}

// cgroupUsage reads a memory cgroup's limit and usage (v2's memory.max and
// memory.current, else v1's memory.limit_in_bytes and usage_in_bytes); ok
// is false where it has no limit or the files cannot be read.
func cgroupUsage(dir string) (limit, used int64, ok bool) {
	for _, files := range [][2]string{{"memory.max", "memory.current"}, {"memory.limit_in_bytes", "memory.usage_in_bytes"}} {
		l, lerr := readInt(filepath.Join(dir, files[0]))
		u, uerr := readInt(filepath.Join(dir, files[1]))
		if lerr == nil && uerr == nil {
			// v1 writes "no limit" as the largest page-aligned int64.
			return l, u, l < math.MaxInt64&^(1<<12-1)
		}
	}
	return 0, 0, false
}

func readInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64) // v2's "max" fails: no limit
}
