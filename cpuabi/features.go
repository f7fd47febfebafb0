package cpuabi

import (
	"slices"

	"golang.org/x/sys/cpu"
)

// CPU features. An engine records every feature its code may use, as
// Linux's /proc/cpuinfo spells it; codegen gives llc exactly those (and
// turns every other extension off), and the loader refuses an engine
// needing one this CPU lacks instead of letting the code die of SIGILL.

// X86Feature is an x86-64 extension kiln's code may use.
type X86Feature struct {
	// Name is the feature as /proc/cpuinfo spells it: what engines record.
	Name string
	// LLVM is llc's -mattr name for it.
	LLVM string
	// Needs are the features LLVM turns on with this one: a feature set
	// holding it holds them too, or llc would use them unrecorded.
	Needs []string
	has   func() bool
}

// X86Features are the x86-64 extensions beyond the x86-64 baseline
// (SSE2) that kiln gives llc, each after the features it needs.
var X86Features = []X86Feature{
	{"pni", "sse3", nil, func() bool { return cpu.X86.HasSSE3 }},
	{"ssse3", "ssse3", []string{"pni"}, func() bool { return cpu.X86.HasSSSE3 }},
	{"sse4_1", "sse4.1", []string{"ssse3"}, func() bool { return cpu.X86.HasSSE41 }},
	{"sse4_2", "sse4.2", []string{"sse4_1"}, func() bool { return cpu.X86.HasSSE42 }},
	{"popcnt", "popcnt", nil, func() bool { return cpu.X86.HasPOPCNT }},
	{"bmi1", "bmi", nil, func() bool { return cpu.X86.HasBMI1 }},
	{"bmi2", "bmi2", nil, func() bool { return cpu.X86.HasBMI2 }},
	{"3dnowprefetch", "prfchw", nil, hostPrefetchW}, // PREFETCHW: the GEMM's C tile comes exclusive
	{"avx", "avx", []string{"sse4_2"}, func() bool { return cpu.X86.HasAVX }},
	{"avx2", "avx2", []string{"avx"}, func() bool { return cpu.X86.HasAVX2 }},
	{"fma", "fma", []string{"avx"}, func() bool { return cpu.X86.HasFMA }},
	{"f16c", "f16c", []string{"avx"}, hostF16C},
	{"avx_vnni", "avxvnni", []string{"avx2"}, func() bool { return cpu.X86.HasAVXVNNI }},
	{"avx512f", "avx512f", []string{"avx2", "fma", "f16c"}, func() bool { return cpu.X86.HasAVX512F }},
	{"avx512cd", "avx512cd", []string{"avx512f"}, func() bool { return cpu.X86.HasAVX512CD }},
	{"avx512bw", "avx512bw", []string{"avx512f"}, func() bool { return cpu.X86.HasAVX512BW }},
	{"avx512dq", "avx512dq", []string{"avx512f"}, func() bool { return cpu.X86.HasAVX512DQ }},
	{"avx512vl", "avx512vl", []string{"avx512f"}, func() bool { return cpu.X86.HasAVX512VL }},
	{"avx512ifma", "avx512ifma", []string{"avx512f"}, func() bool { return cpu.X86.HasAVX512IFMA }},
	{"avx512vbmi", "avx512vbmi", []string{"avx512bw"}, func() bool { return cpu.X86.HasAVX512VBMI }},
	{"avx512_vbmi2", "avx512vbmi2", []string{"avx512bw"}, func() bool { return cpu.X86.HasAVX512VBMI2 }},
	{"avx512_vnni", "avx512vnni", []string{"avx512f"}, func() bool { return cpu.X86.HasAVX512VNNI }},
	{"avx512_bitalg", "avx512bitalg", []string{"avx512bw"}, func() bool { return cpu.X86.HasAVX512BITALG }},
	{"avx512_vpopcntdq", "avx512vpopcntdq", []string{"avx512f"}, func() bool { return cpu.X86.HasAVX512VPOPCNTDQ }},
	{"avx512_bf16", "avx512bf16", []string{"avx512bw"}, func() bool { return cpu.X86.HasAVX512BF16 }},
	{"avx512_fp16", "avx512fp16", []string{"avx512bw", "avx512dq", "avx512vl"}, hostAVX512FP16},
	{"amx_tile", "amx-tile", nil, func() bool { return cpu.X86.HasAMXTile }},
	{"amx_int8", "amx-int8", []string{"amx_tile"}, func() bool { return cpu.X86.HasAMXInt8 }},
}

// arm64Features are the AArch64 features engines record.
var arm64Features = map[string]func() bool{
	"asimd":   func() bool { return cpu.ARM64.HasASIMD },
	"asimddp": func() bool { return cpu.ARM64.HasASIMDDP },
	"i8mm":    func() bool { return cpu.ARM64.HasI8MM },
}

// hostHas reports whether this CPU has the named feature; a name kiln
// does not know is one it cannot vouch for, so it has not.
func hostHas(name string) bool {
	if has, ok := arm64Features[name]; ok {
		return has()
	}
	i := slices.IndexFunc(X86Features, func(f X86Feature) bool { return f.Name == name })
	return i >= 0 && X86Features[i].has()
}

// MissingFeatures returns the features in need that this CPU lacks.
func MissingFeatures(need []string) []string {
	var missing []string
	for _, f := range need {
		if !hostHas(f) {
			missing = append(missing, f)
		}
	}
	return missing
}

// HostX86Features are the X86Features this CPU has, less any whose needs
// it lacks (a virtual machine may hide one), in X86Features' order.
func HostX86Features() []string {
	var out []string
	for _, f := range X86Features {
		if f.has() && containsAll(out, f.Needs) {
			out = append(out, f.Name)
		}
	}
	return out
}

// CloseX86 returns feats with every feature they need, in X86Features'
// order; ok is false when one is not an X86Feature.
func CloseX86(feats ...string) (closed []string, ok bool) {
	want := map[string]bool{}
	var add func(name string) bool
	add = func(name string) bool {
		i := slices.IndexFunc(X86Features, func(f X86Feature) bool { return f.Name == name })
		if i < 0 {
			return false
		}
		want[name] = true
		for _, n := range X86Features[i].Needs {
			add(n)
		}
		return true
	}
	ok = true
	for _, f := range feats {
		ok = add(f) && ok
	}
	for _, f := range X86Features {
		if want[f.Name] {
			closed = append(closed, f.Name)
		}
	}
	return closed, ok
}

func containsAll(have, need []string) bool {
	for _, n := range need {
		if !slices.Contains(have, n) {
			return false
		}
	}
	return true
}

// X86CPU is an x86-64 --cpu name and the features its engines record.
type X86CPU struct {
	Name string
	// LLC is llc's -mcpu for the name (its scheduling model) where LLVM 14
	// does not know it; "" means Name.
	LLC      string
	Features []string
	// Level, for the names RebuildAdvice may suggest, says what the level
	// adds; "" for a CPU with a level's features under another name.
	Level string
}

// x86Level closes feats; the table below names only X86Features.
func x86Level(feats ...string) []string {
	closed, ok := CloseX86(feats...)
	if !ok {
		panic("cpuabi: a CPU level names a feature X86Features lacks")
	}
	return closed
}

var (
	x86V3       = x86Level("popcnt", "bmi1", "bmi2", "avx2", "fma", "f16c")
	x86V4       = x86Level(slices.Concat(x86V3, []string{"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})...)
	x86Cascade  = x86Level(slices.Concat(x86V4, []string{"avx512_vnni", "3dnowprefetch"})...)
	x86Icelake  = x86Level(slices.Concat(x86Cascade, []string{"avx512ifma", "avx512vbmi", "avx512_vbmi2", "avx512_bitalg", "avx512_vpopcntdq"})...)
	x86Zen4     = x86Level(slices.Concat(x86Icelake, []string{"avx512_bf16"})...)
	x86Sapphire = x86Level(slices.Concat(x86Zen4, []string{"avx512_fp16", "avx_vnni", "amx_tile", "amx_int8"})...)
)

// X86CPUs are the x86-64 CPUs --cpu names, least capable first ("native"
// is this machine's HostX86Features).
var X86CPUs = []X86CPU{
	{Name: "x86-64-v3", Features: x86V3, Level: "AVX2 and FMA"},
	{Name: "haswell", Features: x86V3},
	{Name: "znver2", Features: x86V3},
	{Name: "znver3", Features: x86V3},
	{Name: "x86-64-v4", Features: x86V4, Level: "AVX-512 without VNNI: the int8 kernels then multiply in int16 pairs"},
	{Name: "skylake-avx512", Features: x86V4},
	{Name: "cascadelake", Features: x86Cascade, Level: "AVX-512 with VNNI"},
	{Name: "icelake-server", Features: x86Icelake, Level: "AVX-512 with VNNI and VBMI, without AMX tiles"},
	{Name: "icelake-client", Features: x86Icelake},
	{Name: "znver4", LLC: "znver3", Features: x86Zen4},
	{Name: "sapphirerapids", Features: x86Sapphire, Level: "AVX-512 FP16 and BF16, AVX-VNNI and AMX tiles"},
}

// LookupX86CPU finds a --cpu name in X86CPUs.
func LookupX86CPU(name string) (X86CPU, bool) {
	i := slices.IndexFunc(X86CPUs, func(c X86CPU) bool { return c.Name == name })
	if i < 0 {
		return X86CPU{}, false
	}
	return X86CPUs[i], true
}

// BestX86Level is the most capable --cpu level whose engines this CPU
// runs (AMX levels only where Linux grants the tiles); false if none.
func BestX86Level() (X86CPU, bool) {
	for i := len(X86CPUs) - 1; i >= 0; i-- {
		c := X86CPUs[i]
		if c.Level == "" || len(MissingFeatures(c.Features)) > 0 {
			continue
		}
		if slices.Contains(c.Features, "amx_tile") && EnableAMX() != nil {
			continue
		}
		return c, true
	}
	return X86CPU{}, false
}
