package cpu

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kiln-ml/kiln/cpuabi"
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
)

// The CPU targets: a triple (x86-64 or AArch64 Linux) and a CPU. A target
// is a schedule (vector width, GEMM register tile) and a few target
// instructions (the barrier's pause and yield, the cycle counter, the int8
// dot products); every other kernel is the same generic LLVM IR, which llc
// lowers to AVX or NEON.

// The canonical triples engines record (and runtime.HostTriple names).
const (
	TripleX86   = "x86_64-unknown-linux-gnu"
	TripleARM64 = "aarch64-unknown-linux-gnu"
)

// NormalizeTriple maps a --target spelling to the triple engines record:
// x86_64-linux-gnu, x86_64-unknown-linux-gnu, aarch64-linux-gnu,
// aarch64-unknown-linux-gnu and arm64-linux-gnu are accepted.
func NormalizeTriple(t string) (string, error) {
	arch, rest, _ := strings.Cut(t, "-")
	rest = strings.TrimPrefix(rest, "unknown-")
	if rest == "linux-gnu" || rest == "linux" {
		switch arch {
		case "x86_64", "amd64":
			return TripleX86, nil
		case "aarch64", "arm64":
			return TripleARM64, nil
		}
	}
	return "", fmt.Errorf("unknown target %q: kiln's CPU targets are x86_64-linux-gnu and aarch64-linux-gnu", t)
}

// HostTriple is the triple of the machine running this program.
func HostTriple() string {
	if goruntime.GOARCH == "arm64" {
		return TripleARM64
	}
	return TripleX86
}

func isARM64(triple string) bool { return strings.HasPrefix(triple, "aarch64") }

// DefaultCPU is the CPU a build for triple takes when none is named: this
// machine's for its own triple, the baseline of another (every ARMv8-A has
// NEON; x86-64-v3 is kiln's x86 minimum).
func DefaultCPU(triple string) string {
	switch {
	case triple == HostTriple():
		return "native"
	case isARM64(triple):
		return "generic"
	}
	return "x86-64-v3"
}

// arm64CPUs are the AArch64 CPUs kiln names, with the features (as Linux's
// /proc/cpuinfo spells them) their int8 kernels use: asimddp (sdot/udot,
// ARMv8.2's dot product) and i8mm (usdot: u8·s8 as vpdpbusd does). Every
// AArch64 CPU has asimd (NEON).
var arm64CPUs = map[string][]string{
	"generic": nil, "cortex-a53": nil, "cortex-a57": nil, "cortex-a72": nil, "cortex-a73": nil,
	"cortex-a55": {"asimddp"}, "cortex-a75": {"asimddp"}, "cortex-a76": {"asimddp"}, "cortex-a77": {"asimddp"},
	"cortex-a78": {"asimddp"}, "cortex-x1": {"asimddp"}, "neoverse-n1": {"asimddp"}, "neoverse-e1": {"asimddp"},
	"apple-m1": {"asimddp"}, "apple-a14": {"asimddp"}, "carmel": nil,
	"cortex-a510": {"asimddp", "i8mm"}, "cortex-a710": {"asimddp", "i8mm"}, "cortex-x2": {"asimddp", "i8mm"},
	"neoverse-n2": {"asimddp", "i8mm"}, "neoverse-v1": {"asimddp", "i8mm"},
}

// ARM64CPUs lists the AArch64 CPU names --cpu takes, sorted.
func ARM64CPUs() []string {
	names := make([]string, 0, len(arm64CPUs))
	for n := range arm64CPUs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// featuresFor lists the features the code for opts' triple and CPU uses
// (and the engine records).
func featuresFor(opts Options) ([]string, error) {
	if !isARM64(opts.Triple) {
		if opts.CPU == "native" && HostTriple() != TripleX86 {
			return nil, fmt.Errorf("codegen/cpu: --cpu native names this machine's CPU, which is not x86-64: name an x86-64 CPU (x86-64-v3, x86-64-v4, ...)")
		}
		return cpuFeatures(opts.CPU)
	}
	if opts.CPU == "native" {
		if HostTriple() != TripleARM64 {
			return nil, fmt.Errorf("codegen/cpu: --cpu native names this machine's CPU, which is not AArch64: name the target's (%s)", strings.Join(ARM64CPUs(), ", "))
		}
		return hostARM64Features()
	}
	extra, ok := arm64CPUs[opts.CPU]
	if !ok {
		return nil, fmt.Errorf("codegen/cpu: unknown AArch64 CPU %q (use %s)", opts.CPU, strings.Join(ARM64CPUs(), ", "))
	}
	return append([]string{"asimd"}, extra...), nil
}

// cpuFeatures lists the x86-64 features the code for cpu (a --cpu name)
// may use: its row of cpuabi.X86CPUs, or for native this machine's
// (cpuabi.HostX86Features, AMX only where Linux grants this process the
// tiles: code using them without it dies of SIGILL).
func cpuFeatures(cpu string) ([]string, error) {
	var feats []string
	switch c, ok := cpuabi.LookupX86CPU(cpu); {
	case ok:
		feats = c.Features
	case cpu == "native":
		for _, f := range cpuabi.HostX86Features() {
			if !slices.Contains(amxFeatures, f) || cpuabi.EnableAMX() == nil {
				feats = append(feats, f)
			}
		}
		if !slices.Contains(feats, "avx2") || !slices.Contains(feats, "fma") {
			return nil, fmt.Errorf("codegen/cpu: the host CPU lacks AVX2/FMA; kiln needs at least x86-64-v3")
		}
	case cpu == "x86-64" || cpu == "x86-64-v2":
		return nil, fmt.Errorf("codegen/cpu: --cpu %s has no AVX2; kiln needs at least x86-64-v3", cpu)
	default:
		return nil, fmt.Errorf("codegen/cpu: unknown CPU %q (use native or one of %s)", cpu, strings.Join(x86CPUNames(), ", "))
	}
	return slices.Clone(feats), nil
}

func x86CPUNames() []string {
	names := make([]string, len(cpuabi.X86CPUs))
	for i, c := range cpuabi.X86CPUs {
		names[i] = c.Name
	}
	return names
}

// x86Unused are LLVM 14's x86-64 extensions beyond the baseline that kiln
// never gives llc (cpuabi.X86Features are the ones it may): llcTarget turns
// them off so that no --cpu brings one in unrecorded.
var x86Unused = []string{
	"3dnow", "3dnowa", "adx", "aes", "amx-bf16", "avx512er", "avx512pf", "avx512vp2intersect",
	"cldemote", "clflushopt", "clwb", "clzero", "crc32", "cx16", "enqcmd", "fma4", "fsgsbase",
	"gfni", "hreset", "invpcid", "kl", "lwp", "lzcnt", "movbe", "movdir64b", "movdiri", "mwaitx",
	"pclmul", "pconfig", "pku", "prefetchwt1", "ptwrite", "rdpid", "rdrnd", "rdseed",
	"rtm", "sahf", "serialize", "sgx", "sha", "shstk", "sse4a", "tbm", "tsxldtrk", "uintr",
	"vaes", "vpclmulqdq", "waitpkg", "wbnoinvd", "widekl", "xop", "xsave", "xsavec", "xsaveopt",
	"xsaves",
}

// llcTarget is the triple, CPU and features opt and llc compile for. On
// x86-64, -mcpu picks the scheduling model and -mattr exactly the
// recorded features feats: each of cpuabi.X86Features on or off, every
// other extension off, so that the code cannot use what the engine does
// not record (-mcpu=x86-64-v3 alone brings F16C, native AVX512-FP16).
func llcTarget(opts Options, feats []string) []string {
	flags := []string{"-mtriple=" + opts.Triple}
	if isARM64(opts.Triple) {
		return append(flags, "-mcpu="+opts.CPU)
	}
	mcpu := opts.CPU
	if c, ok := cpuabi.LookupX86CPU(opts.CPU); ok && c.LLC != "" {
		mcpu = c.LLC
	}
	var attrs []string
	for _, f := range cpuabi.X86Features {
		sign := "-"
		if slices.Contains(feats, f.Name) {
			sign = "+"
		}
		attrs = append(attrs, sign+f.LLVM)
	}
	for _, f := range x86Unused {
		attrs = append(attrs, "-"+f)
	}
	return append(flags, "-mcpu="+mcpu, "-mattr="+strings.Join(attrs, ","))
}

// hostARM64Features reads this AArch64 machine's features.
func hostARM64Features() ([]string, error) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return nil, fmt.Errorf("codegen/cpu: reading host CPU features: %w", err)
	}
	have := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "Features" {
			for _, f := range strings.Fields(v) {
				have[f] = true
			}
			break
		}
	}
	out := []string{"asimd"}
	for _, f := range []string{"asimddp", "i8mm"} {
		if have[f] {
			out = append(out, f)
		}
	}
	return out, nil
}

// schedule sets the vector width and the FP32 GEMM register tile: AVX-512
// 16 lanes and 6×4 vectors of its 32 registers, AVX2 8 lanes and 6×2 of
// 16, NEON 4 lanes (128 bits) and 8×3 of its 32 (fmla by element reads
// the broadcast A values from two more).
func (g *gen) schedule() {
	switch {
	case isARM64(g.opts.Triple):
		g.vl, g.mr, g.nv = 4, 8, 3
	case hasFeature(g.feats, "avx512f"):
		g.vl, g.mr, g.nv = 16, 6, 4
	default:
		g.vl, g.mr, g.nv = 8, 6, 2
	}
	g.l2 = defaultL2
	if g.opts.CPU == "native" {
		if n := hostL2(); n > 0 {
			g.l2 = n
		}
	}
}

// defaultL2 is the per-core L2 assumed when the target is not this
// machine: 1 MiB (Zen 4, Ice Lake-SP; Sapphire Rapids has 2, Neoverse N1
// 1).
const defaultL2 = 1 << 20

// hostL2 reads this machine's per-core L2 size from sysfs once (0:
// unknown).
var hostL2 = sync.OnceValue(func() int64 {
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index*")
	for _, d := range dirs {
		if level, err := os.ReadFile(filepath.Join(d, "level")); err != nil || strings.TrimSpace(string(level)) != "2" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "size"))
		if err != nil {
			return 0
		}
		return cacheSize(string(b))
	}
	return 0
})

// cacheSize parses sysfs's cache size ("2048K", "1M"), 0 if it cannot.
func cacheSize(s string) int64 {
	s, mult := strings.TrimSpace(s), int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		s, mult = strings.TrimSuffix(s, "K"), 1<<10
	case strings.HasSuffix(s, "M"):
		s, mult = strings.TrimSuffix(s, "M"), 1<<20
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		return n * mult
	}
	return 0
}

func (g *gen) arm64() bool { return isARM64(g.opts.Triple) }

// spinPause is the hint a barrier's spin loop gives the core each poll:
// PAUSE on x86, YIELD on AArch64.
func (g *gen) spinPause(b *ll.Block) {
	if g.arm64() {
		b.NewCall(g.declare("llvm.aarch64.hint", types.Void, i32), c32(1)) // hint #1: yield
		return
	}
	b.NewCall(g.declare("llvm.x86.sse2.pause", types.Void))
}

// schedYield calls sched_yield(2) without libc.
func (g *gen) schedYield(b *ll.Block) {
	fn := types.NewPointer(types.NewFunc(i64, i64))
	if g.arm64() {
		asm := ll.NewInlineAsm(fn, "svc #0", "={x0},{x8},~{memory}")
		asm.SideEffect = true
		b.NewCall(asm, c64(124)) // __NR_sched_yield on arm64
		return
	}
	asm := ll.NewInlineAsm(fn, "syscall", "={rax},{rax},~{rcx},~{r11},~{memory}")
	asm.SideEffect = true
	b.NewCall(asm, c64(24)) // __NR_sched_yield on x86-64
}

// cycleCounter returns the function the profiling entry point reads time
// with: the TSC on x86 (llvm.readcyclecounter); on AArch64 the virtual
// counter CNTVCT_EL0, which user code may read (readcyclecounter would read
// PMCCNTR_EL0, which traps at EL0 unless the kernel allows it).
func (g *gen) cycleCounter() *ll.Func {
	if !g.arm64() {
		return g.declare("llvm.readcyclecounter", i64)
	}
	if f, ok := g.decls["kiln_cntvct"]; ok {
		return f
	}
	f := g.mod.NewFunc("kiln_cntvct", i64)
	f.Linkage = enum.LinkageInternal
	b := f.NewBlock("")
	asm := ll.NewInlineAsm(types.NewPointer(types.NewFunc(i64)), "mrs $0, cntvct_el0", "=r")
	asm.SideEffect = true
	b.NewRet(b.NewCall(asm))
	g.decls["kiln_cntvct"] = f
	return f
}

// linkCommand returns the command that links obj into the shared object
// so for the triple: ld.lld for any triple (on PATH or next to llc); for
// x86-64 the host's gcc or cc also do.
func linkCommand(llc, triple, obj, so string) (*exec.Cmd, error) {
	if lld := findLLD(llc); lld != "" {
		return exec.Command(lld, "-shared", "--hash-style=both", "-o", so, obj), nil
	}
	if isARM64(triple) {
		if HostTriple() != TripleARM64 {
			return nil, errors.New("codegen/cpu: linking AArch64 engines needs ld.lld: run `make deps`")
		}
	}
	for _, cc := range []string{"gcc", "cc"} {
		if p, err := exec.LookPath(cc); err == nil && (triple == HostTriple()) {
			return exec.Command(p, "-shared", "-nostdlib", "-o", so, obj), nil
		}
	}
	return nil, errors.New("codegen/cpu: no linker found (ld.lld or gcc): run `make deps`")
}

// AvailableFor is Available for a target triple: cross-compiling to
// AArch64 needs ld.lld.
func AvailableFor(triple string) error {
	if err := Available(); err != nil {
		return err
	}
	if triple == HostTriple() {
		return nil
	}
	llc, _ := findLLC("")
	if findLLD(llc) == "" {
		return fmt.Errorf("linking %s engines needs ld.lld: run `make deps`", triple)
	}
	return nil
}

// findLLD finds LLVM's linker as ld.lld on PATH, beside llc, or as Debian's
// lld-14 installs it (ld.lld-14, /usr/lib/llvm-14/bin/ld.lld: no plain
// ld.lld without the lld package), which `make deps` accepts; "" if none.
func findLLD(llc string) string {
	for _, name := range []string{"ld.lld", "ld.lld-14", "/usr/lib/llvm-14/bin/ld.lld"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if llc != "" {
		return siblingTool(llc, "ld.lld")
	}
	return ""
}
