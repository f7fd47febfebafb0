package runtime

import (
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestRebuildAdvice: an engine needing VNNI on an AVX-512 CPU without it
// is pointed at --cpu x86-64-v4, anything else at x86-64-v3; the VNNI
// features are checked as /proc/cpuinfo names them.
func TestRebuildAdvice(t *testing.T) {
	avx512 := cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL
	if got := RebuildAdvice([]string{"avx512_vnni"}); avx512 != strings.Contains(got, "--cpu x86-64-v4") {
		t.Errorf("missing avx512_vnni (host AVX-512: %v): %q", avx512, got)
	}
	if got := RebuildAdvice([]string{"avx512f", "avx512_vnni"}); cpu.X86.HasAVX2 && cpu.X86.HasFMA && !strings.Contains(got, "--cpu x86-64-v3") {
		t.Errorf("missing avx512f: %q", got)
	}
	if m := MissingFeatures([]string{"avx512_vnni"}); (len(m) == 0) != cpu.X86.HasAVX512VNNI {
		t.Errorf("MissingFeatures(avx512_vnni) = %v, host has it: %v", m, cpu.X86.HasAVX512VNNI)
	}
	if m := MissingFeatures([]string{"avx_vnni"}); (len(m) == 0) != cpu.X86.HasAVXVNNI {
		t.Errorf("MissingFeatures(avx_vnni) = %v, host has it: %v", m, cpu.X86.HasAVXVNNI)
	}
	// An engine with AMX tiles on an AVX-512 VNNI CPU without them.
	vnni := len(MissingFeatures([]string{"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx512vbmi"})) == 0
	if got := RebuildAdvice([]string{"amx_tile", "amx_int8"}); vnni != strings.Contains(got, "--cpu icelake-server") {
		t.Errorf("missing AMX (host AVX-512 VNNI: %v): %q", vnni, got)
	}
	if m := MissingFeatures([]string{"amx_int8"}); (len(m) == 0) != cpu.X86.HasAMXInt8 {
		t.Errorf("MissingFeatures(amx_int8) = %v, host has it: %v", m, cpu.X86.HasAMXInt8)
	}
}
