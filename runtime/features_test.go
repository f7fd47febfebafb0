package runtime_test

import (
	"bytes"
	"fmt"
	"os"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// TestMissingFeatures: the loader reads each feature engines record as
// Linux reads it (the names are /proc/cpuinfo's), F16C and AVX512-FP16
// included, and a name it does not know counts as missing.
func TestMissingFeatures(t *testing.T) {
	if goruntime.GOARCH != "amd64" {
		t.Skip("the x86-64 features")
	}
	flags := cpuinfoFlags(t)
	for _, f := range cpuabi.X86Features {
		has := len(runtime.MissingFeatures([]string{f.Name})) == 0
		assert.Equal(t, flags[f.Name], has, "%s: /proc/cpuinfo says %v, the loader %v", f.Name, flags[f.Name], has)
	}
	assert.Equal(t, []string{"avx512er", "no-such-feature"}, runtime.MissingFeatures([]string{"avx512er", "no-such-feature"}))
	for _, f := range cpuabi.HostX86Features() {
		assert.True(t, flags[f], "native records %s, which /proc/cpuinfo lacks", f)
	}
}

// cpuinfoFlags reads the first "flags" line of /proc/cpuinfo.
func cpuinfoFlags(t *testing.T) map[string]bool {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			flags := map[string]bool{}
			for _, f := range strings.Fields(v) {
				flags[f] = true
			}
			return flags
		}
	}
	t.Skip("/proc/cpuinfo has no flags line")
	return nil
}

// TestCPULevels: every --cpu row holds the features its features need
// (else llc would turn them on unrecorded), and the levels only grow.
func TestCPULevels(t *testing.T) {
	var prev []string
	for _, c := range cpuabi.X86CPUs {
		closed, ok := cpuabi.CloseX86(c.Features...)
		require.True(t, ok, c.Name)
		assert.Equal(t, closed, c.Features, "%s is not closed under its features' needs", c.Name)
		if c.Level == "" {
			continue
		}
		for _, f := range prev {
			assert.Contains(t, c.Features, f, "level %s lacks %s of the level before", c.Name, f)
		}
		prev = c.Features
	}
}

// TestRebuildAdvice: the advice names native and the most capable --cpu
// level whose features this CPU has.
func TestRebuildAdvice(t *testing.T) {
	if goruntime.GOARCH != "amd64" {
		t.Skip("the x86-64 levels")
	}
	got := runtime.RebuildAdvice()
	level, ok := cpuabi.BestX86Level()
	if !ok {
		assert.Contains(t, got, "at least AVX2 and FMA")
		return
	}
	assert.Contains(t, got, "--cpu native")
	assert.Contains(t, got, "`--cpu "+level.Name+"`")
	assert.Empty(t, runtime.MissingFeatures(level.Features))
	for _, c := range cpuabi.X86CPUs[slices.IndexFunc(cpuabi.X86CPUs, func(c cpuabi.X86CPU) bool { return c.Name == level.Name })+1:] {
		if c.Level != "" && !slices.Contains(c.Features, "amx_tile") {
			assert.NotEmpty(t, runtime.MissingFeatures(c.Features), "%s runs here too and is more capable than %s", c.Name, level.Name)
		}
	}
}

// TestLoadRefusesMissingFeatures: an engine whose code records a feature
// this CPU lacks is refused at load, naming the feature, the --cpu it was
// built with and the --cpu to rebuild with, before its code runs (it
// would die of SIGILL).
func TestLoadRefusesMissingFeatures(t *testing.T) {
	buf := tiny(t)
	lacking := "avx512er" // Xeon Phi's, which kiln does not know: no CPU passes it
	for _, f := range cpuabi.X86Features {
		if len(runtime.MissingFeatures([]string{f.Name})) > 0 {
			lacking = f.Name
			break
		}
	}
	bad := edit(t, buf, func(e *engine.Engine) {
		// The code's ABI record lists the features as JSON: give it
		// lacking instead, padded to the same length.
		so := slices.Clone(e.Code["x86_64-unknown-linux-gnu"])
		start := bytes.Index(so, []byte(`"features":[`))
		require.Positive(t, start)
		end := start + bytes.IndexByte(so[start:], ']') + 1
		rec := fmt.Sprintf(`"features":[%q]`, lacking)
		require.LessOrEqual(t, len(rec), end-start)
		copy(so[start:end], rec+strings.Repeat(" ", end-start-len(rec)))
		e.Code["x86_64-unknown-linux-gnu"] = so
		e.Meta.Target.Features = []string{lacking}
	})
	_, err := runtime.LoadBytes(bad)
	require.Error(t, err)
	assert.ErrorContains(t, err, "this CPU lacks "+lacking+", which the engine's code needs (it was built with --cpu x86-64-v3)")
	if level, ok := cpuabi.BestX86Level(); ok {
		assert.ErrorContains(t, err, "`cc build --cpu native` on this machine, or `--cpu "+level.Name+"`")
	}
}
