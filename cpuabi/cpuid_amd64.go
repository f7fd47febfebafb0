package cpuabi

import "golang.org/x/sys/cpu"

// cpuid executes CPUID for leaf and subleaf.
func cpuid(leaf, subleaf uint32) (eax, ebx, ecx, edx uint32)

// hostF16C, hostAVX512FP16 and hostPrefetchW read the features kiln's
// code may use that golang.org/x/sys/cpu does not report:
// CPUID.1:ECX[29], CPUID.(7,0):EDX[23] and CPUID.80000001H:ECX[8]. The
// first two also need the OS to save their registers, which HasAVX and
// HasAVX512F include.
func hostF16C() bool {
	_, _, ecx, _ := cpuid(1, 0)
	return ecx&(1<<29) != 0 && cpu.X86.HasAVX
}

func hostAVX512FP16() bool {
	if maxLeaf, _, _, _ := cpuid(0, 0); maxLeaf < 7 {
		return false
	}
	_, _, _, edx := cpuid(7, 0)
	return edx&(1<<23) != 0 && cpu.X86.HasAVX512F
}

func hostPrefetchW() bool {
	if maxLeaf, _, _, _ := cpuid(0x80000000, 0); maxLeaf < 0x80000001 {
		return false
	}
	_, _, ecx, _ := cpuid(0x80000001, 0)
	return ecx&(1<<8) != 0
}
