package runtime

import (
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/cpuabi"
)

// checkFeatures refuses code needing CPU features this CPU lacks, or AMX
// tiles Linux does not grant this process: the code would die of SIGILL.
// builtFor is the engine's --cpu.
func checkFeatures(need []string, builtFor string) error {
	if missing := MissingFeatures(need); len(missing) > 0 {
		return fmt.Errorf("this CPU lacks %s, which the engine's code needs (it was built with --cpu %s); %s",
			strings.Join(missing, ", "), builtFor, RebuildAdvice())
	}
	if slices.Contains(need, "amx_tile") {
		if err := cpuabi.EnableAMX(); err != nil {
			return fmt.Errorf("the engine's code uses AMX tiles, which Linux does not grant this process (%v); rebuild it with `cc build --cpu icelake-server` (AVX-512 VNNI without AMX)", err)
		}
	}
	return nil
}

// MissingFeatures returns the CPU features in need (as Linux's
// /proc/cpuinfo spells them, what engines record) that this CPU lacks; a
// name kiln does not know counts as missing.
func MissingFeatures(need []string) []string { return cpuabi.MissingFeatures(need) }

// RebuildAdvice says which `cc build --cpu` makes engines this CPU runs:
// native on this machine, or the most capable of kiln's x86-64 levels
// whose features it has.
func RebuildAdvice() string {
	if goruntime.GOARCH == "arm64" {
		// Every AArch64 CPU has NEON; the dot products are the extras.
		return "rebuild it with `cc build --target aarch64-linux-gnu` naming this CPU in --cpu (cortex-a76, neoverse-n1, ...), or --cpu generic (NEON only)"
	}
	level, ok := cpuabi.BestX86Level()
	if !ok {
		return "kiln's x86-64 engines need at least AVX2 and FMA (x86-64-v3)"
	}
	return fmt.Sprintf("rebuild it with `cc build --cpu native` on this machine, or `--cpu %s` (%s), the most capable --cpu level this CPU runs",
		level.Name, level.Level)
}
