package cpu

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/ir"
)

// TestCodeUsesOnlyRecordedFeatures: for each --cpu level, the engine's
// machine code, disassembled, uses no CPU feature the engine does not
// record (the loader checks only those: an unrecorded one is SIGILL on a
// CPU without it), for float models with half-precision conversions, a
// GEMM and a convolution, and for an int8 matrix product (VNNI, AMX).
func TestCodeUsesOnlyRecordedFeatures(t *testing.T) {
	needLLC(t)
	if HostTriple() != TripleX86 {
		t.Skip("x86-64 code")
	}
	objdump := disassembler(t)
	models := map[string]func(t *testing.T) *ir.Model{"float": halfConvGemmModel, "int8": int8MatMulModel}
	for _, cpu := range []string{"x86-64-v3", "x86-64-v4", "cascadelake", "icelake-server", "znver4", "sapphirerapids", "native"} {
		for name, model := range models {
			res, err := Compile(model(t), Options{CPU: cpu, Winograd: WinogradOff})
			if err != nil {
				t.Fatalf("--cpu %s, %s model: %v", cpu, name, err)
			}
			used := usedFeatures(t, objdump, res.SharedObject)
			for f, example := range used {
				if !slices.Contains(res.Features, f) {
					t.Errorf("--cpu %s, %s model: the code uses %s (%s), which the engine does not record (%v)", cpu, name, f, example, res.Features)
				}
			}
			// The features are given to llc, not only recorded: 256-bit
			// vectors and F16C's conversions (or AVX512-FP16's) at
			// x86-64-v3, AVX-512's zmm above.
			if name != "float" {
				continue
			}
			_, half := used["f16c"]
			if _, fp16 := used["avx512_fp16"]; !half && !fp16 {
				t.Errorf("--cpu %s: the code converts float16 without F16C or AVX512-FP16; llc was not given the engine's features", cpu)
			}
			if _, ok := used["avx512f"]; slices.Contains(res.Features, "avx512f") && !ok {
				t.Errorf("--cpu %s: the code uses no AVX-512 instruction; llc was not given the engine's features", cpu)
			}
		}
	}
}

// TestBelowX86V3Refused: x86-64-v2 and older CPUs lack AVX2, which every
// x86-64 engine needs; the error names the level to use.
func TestBelowX86V3Refused(t *testing.T) {
	for _, cpu := range []string{"x86-64", "x86-64-v2"} {
		if _, err := featuresFor(Options{Triple: TripleX86, CPU: cpu}); err == nil || !strings.Contains(err.Error(), "x86-64-v3") {
			t.Errorf("--cpu %s: %v, want an error pointing at x86-64-v3", cpu, err)
		}
	}
	if _, err := featuresFor(Options{Triple: TripleX86, CPU: "pentium4"}); err == nil || !strings.Contains(err.Error(), "icelake-server") {
		t.Errorf("--cpu pentium4: %v, want an error listing the CPUs", err)
	}
}

// TestX86FeatureListComplete: every feature llc knows for x86-64 is one
// kiln gives or withholds (cpuabi.X86Features, x86Unused), the baseline, or
// a tuning or code-generation mode that adds no instruction; a newer LLVM
// with a new extension fails here instead of leaking it into engines.
func TestX86FeatureListComplete(t *testing.T) {
	llc, err := findLLC("")
	if err != nil {
		t.Skip(err)
	}
	out, _ := exec.Command(llc, "-march=x86-64", "-mattr=help").CombinedOutput()
	known := map[string]bool{}
	for _, f := range cpuabi.X86Features {
		known[f.LLVM] = true
	}
	for _, f := range slices.Concat(x86Unused, x86Baseline, x86Tuning) {
		known[f] = true
	}
	_, list, _ := strings.Cut(string(out), "Available features for this target:")
	n := 0
	for _, line := range strings.Split(list, "\n") {
		name, _, ok := strings.Cut(strings.TrimSpace(line), " - ")
		if !ok {
			continue
		}
		n++
		if name = strings.TrimSpace(name); !known[name] {
			t.Errorf("llc's x86 feature %q is in none of kiln's lists: add it to cpuabi.X86Features (with a name the loader checks) or x86Unused", name)
		}
	}
	if n < 100 {
		t.Fatalf("llc -mattr=help listed %d features:\n%s", n, out)
	}
}

// x86Baseline are in every x86-64 CPU; x86Tuning select how code is
// scheduled or hardened, not which instructions exist.
var (
	x86Baseline = []string{"64bit", "cmov", "cx8", "fxsr", "mmx", "nopl", "sse", "sse2", "x87"}
	x86Tuning   = []string{
		"16bit-mode", "32bit-mode", "64bit-mode", "branchfusion", "ermsb", "false-deps-lzcnt-tzcnt",
		"false-deps-popcnt", "fast-11bytenop", "fast-15bytenop", "fast-7bytenop", "fast-bextr",
		"fast-gather", "fast-hops", "fast-lzcnt", "fast-movbe", "fast-scalar-fsqrt",
		"fast-scalar-shift-masks", "fast-shld-rotate", "fast-variable-crosslane-shuffle",
		"fast-variable-perlane-shuffle", "fast-vector-fsqrt", "fast-vector-shift-masks", "fsrm",
		"idivl-to-divb", "idivq-to-divl", "lea-sp", "lea-uses-ag", "lvi-cfi", "lvi-load-hardening",
		"macrofusion", "pad-short-functions", "prefer-128-bit", "prefer-256-bit",
		"prefer-mask-registers", "retpoline", "retpoline-external-thunk",
		"retpoline-indirect-branches", "retpoline-indirect-calls", "seses", "slow-3ops-lea",
		"slow-incdec", "slow-lea", "slow-pmaddwd", "slow-pmulld", "slow-shld", "slow-two-mem-ops",
		"slow-unaligned-mem-16", "slow-unaligned-mem-32", "soft-float", "sse-unaligned-mem",
		"tagged-globals", "use-aa", "use-glm-div-sqrt-costs", "use-slm-arith-costs", "vzeroupper",
	}
)

// halfConvGemmModel converts to float16 and back (F16C's vcvtps2ph and
// vcvtph2ps; AVX512-FP16 has its own), multiplies a matrix and convolves.
func halfConvGemmModel(t *testing.T) *ir.Model {
	r := rand.New(rand.NewSource(7))
	g := ir.NewGraph("features")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(32, 64)))
	h := g.AddInput("h", ir.TensorType(ir.Float16, ir.S(32, 64)))
	half := g.Apply("Cast", []*ir.Value{x}, ir.AttrI("to", int64(ir.Float16)))
	y := g.Apply("Add", []*ir.Value{half, h})
	y = g.Apply("Cast", []*ir.Value{y}, ir.AttrI("to", int64(ir.Float32)))
	y = g.Apply("MatMul", []*ir.Value{y, g.AddInitializer("w", randTensor(r, 64, 48))})
	y = g.Apply("Relu", []*ir.Value{y})
	img := g.AddInput("img", ir.TensorType(ir.Float32, ir.S(1, 8, 12, 12)))
	c := g.Apply("Conv", []*ir.Value{img, g.AddInitializer("k", randTensor(r, 16, 8, 3, 3)), g.AddInitializer("b", randTensor(r, 16))},
		ir.AttrIs("pads", 1, 1, 1, 1))
	g.SetOutputs(y, g.Apply("Sigmoid", []*ir.Value{c}))
	return ir.NewModel(g, 17)
}

// int8MatMulModel is a u8·s8 matrix product of 16 rows: VNNI's vpdpbusd,
// or AMX's tiles where the target has them.
func int8MatMulModel(t *testing.T) *ir.Model {
	q := newQTest(t, "features8", 9)
	y, roles := qmatmulCase{M: []int64{16}, K: 64, N: 64, xType: ir.Uint8}.build(q)
	y.Name = "y"
	q.g.SetOutputs(y)
	q.group("qmatmul", roles...)
	m := ir.NewModel(q.g, 21)
	m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: ir.KilnDomain, Version: 1})
	return m
}

// disassembler finds llvm-objdump (LLVM 14's, next to llc) or objdump.
func disassembler(t *testing.T) string {
	for _, name := range []string{"llvm-objdump-14", "llvm-objdump", "objdump"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no disassembler (llvm-objdump-14 or objdump): cannot check the code's instructions")
	return ""
}

// usedFeatures disassembles so and returns each CPU feature its
// instructions need (as engines record them), with one instruction that
// needs it.
func usedFeatures(t *testing.T, objdump string, so []byte) map[string]string {
	path := filepath.Join(t.TempDir(), "engine.so")
	if err := os.WriteFile(path, so, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(objdump, "-d", path).Output()
	if err != nil {
		t.Fatalf("%s -d: %v", objdump, err)
	}
	used := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		in, ok := parseInstruction(sc.Text())
		if !ok {
			continue
		}
		for _, f := range in.features() {
			if _, seen := used[f]; !seen {
				used[f] = in.text
			}
		}
	}
	return used
}

// instruction is one disassembled instruction.
type instruction struct {
	encoding  byte   // 0x62 EVEX, 0xc4/0xc5 VEX, else the first opcode byte
	mnemonic  string // lower case, without prefixes
	operands  string
	vexPrefix bool // "{vex}": the VEX form of an instruction AVX-512 also has
	text      string
}

var objdumpLine = regexp.MustCompile(`^\s*(?:[0-9a-f]+:)?\s*((?:[0-9a-f]{2} )+)\s*(.*)$`)

// parseInstruction reads one line of objdump -d ("addr: bytes<TAB>mnemonic<TAB>operands").
func parseInstruction(line string) (instruction, bool) {
	m := objdumpLine.FindStringSubmatch(line)
	if m == nil || strings.TrimSpace(m[2]) == "" {
		return instruction{}, false
	}
	raw, err := hex.DecodeString(strings.ReplaceAll(m[1], " ", ""))
	if err != nil || len(raw) == 0 {
		return instruction{}, false
	}
	in := instruction{text: strings.Join(strings.Fields(m[2]), " ")}
	for _, b := range raw {
		// Legacy prefixes (operand/address size, rep, lock, segments) and REX.
		if b == 0x66 || b == 0x67 || b == 0xf0 || b == 0xf2 || b == 0xf3 || b == 0x2e || b == 0x3e || b == 0x26 || b == 0x36 || b == 0x64 || b == 0x65 || b&0xf0 == 0x40 {
			continue
		}
		in.encoding = b
		break
	}
	fields := strings.Fields(m[2])
	for len(fields) > 0 {
		switch f := fields[0]; f {
		case "{vex}":
			in.vexPrefix = true
		case "{evex}", "lock", "rep", "repe", "repne", "repz", "repnz", "notrack", "data16", "cs", "ds":
		default:
			in.mnemonic, in.operands = strings.ToLower(f), strings.Join(fields[1:], " ")
			return in, true
		}
		fields = fields[1:]
	}
	return instruction{}, false
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}

var (
	maskOperand = regexp.MustCompile(`%k[0-7]\b`)
	highVector  = regexp.MustCompile(`%[xy]mm(1[6-9]|2[0-9]|3[01])\b`)
	// EVEX byte and word integer operations are AVX512-BW's.
	evexByteWord    = regexp.MustCompile(`^vp(.*[bw]|maddwd|unpck[lh]wd|alignr|movb2m|movw2m)$`)
	evexQuadConvert = regexp.MustCompile(`2u?qq$|qq2`) // vcvtps2qq, vcvtuqq2ps: AVX512-DQ's
	// ... except the narrowing moves of dwords and qwords, AVX512-F's.
	evexNarrowing = regexp.MustCompile(`^vpmov(s|us)?[dq][bw]$`)
)

// features maps an instruction to the CPU features it needs, by its
// encoding, registers and mnemonic: EVEX or zmm or mask registers are
// AVX-512; VEX is AVX; families name their extension.
func (in instruction) features() []string {
	m, ops := in.mnemonic, in.operands
	var f []string
	add := func(names ...string) { f = append(f, names...) }
	evex := in.encoding == 0x62
	vex := in.encoding == 0xc4 || in.encoding == 0xc5
	switch {
	case evex, strings.Contains(ops, "%zmm"), maskOperand.MatchString(ops):
		add("avx512f")
	case vex && strings.HasPrefix(m, "v"), strings.Contains(ops, "%ymm"): // BMI and AMX are VEX too
		add("avx")
	}
	if highVector.MatchString(ops) || evex && strings.Contains(ops, "%ymm") && !strings.Contains(ops, "%zmm") {
		add("avx512vl")
	}
	switch {
	case m == "vcvtph2ps" || m == "vcvtps2ph":
		add("f16c")
	case strings.HasPrefix(m, "v") && (strings.HasSuffix(m, "ph") || strings.HasSuffix(m, "sh") || strings.HasSuffix(m, "phx") ||
		strings.Contains(m, "ph2") || strings.Contains(m, "2ph") || strings.Contains(m, "sh2") || strings.Contains(m, "2sh") || m == "vmovw"):
		add("avx512_fp16") // vaddph, vfmadd231ph, vcvtph2psx, vmovsh, ...
	case strings.Contains(m, "bf16"):
		add("avx512_bf16")
	case hasAnyPrefix(m, "vpdpbusd", "vpdpwssd"):
		if vex || in.vexPrefix {
			add("avx_vnni")
		} else {
			add("avx512_vnni")
		}
	case hasAnyPrefix(m, "vfmadd", "vfmsub", "vfnmadd", "vfnmsub"):
		add("fma")
	case hasAnyPrefix(m, "vpmadd52"):
		add("avx512ifma")
	case m == "vpermb" || m == "vpermi2b" || m == "vpermt2b" || m == "vpmultishiftqb":
		add("avx512vbmi")
	case hasAnyPrefix(m, "vpshld", "vpshrd") || m == "vpcompressb" || m == "vpcompressw" || m == "vpexpandb" || m == "vpexpandw":
		add("avx512_vbmi2")
	case m == "vpopcntb" || m == "vpopcntw" || m == "vpshufbitqmb":
		add("avx512_bitalg")
	case m == "vpopcntd" || m == "vpopcntq":
		add("avx512_vpopcntdq")
	case hasAnyPrefix(m, "vplzcnt", "vpconflict", "vpbroadcastm"):
		add("avx512cd")
	case hasAnyPrefix(m, "ldtilecfg", "sttilecfg", "tileload", "tilestore", "tilezero", "tilerelease"):
		add("amx_tile")
	case hasAnyPrefix(m, "tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud"):
		add("amx_int8")
	case m == "tdpbf16ps":
		add("amx_bf16")
	case hasAnyPrefix(m, "popcnt"):
		add("popcnt")
	case hasAnyPrefix(m, "lzcnt"):
		add("abm")
	case hasAnyPrefix(m, "tzcnt", "andn", "bextr", "blsi", "blsmsk", "blsr"):
		add("bmi1")
	case hasAnyPrefix(m, "bzhi", "pdep", "pext", "rorx", "sarx", "shlx", "shrx", "mulx"):
		add("bmi2")
	case hasAnyPrefix(m, "movbe"):
		add("movbe")
	case hasAnyPrefix(m, "adcx", "adox"):
		add("adx")
	case hasAnyPrefix(m, "crc32", "pcmpgtq", "pcmpestr", "pcmpistr"):
		add("sse4_2")
	case m == "prefetchw":
		add("3dnowprefetch")
	case m == "prefetchwt1":
		add("prefetchwt1")
	case hasAnyPrefix(m, "cmpxchg16b"):
		add("cx16")
	}
	if evex {
		switch {
		case evexByteWord.MatchString(m) && !evexNarrowing.MatchString(m), m == "vmovdqu8", m == "vmovdqu16", m == "vdbpsadbw":
			add("avx512bw")
		case m == "vpmullq", evexQuadConvert.MatchString(m), hasAnyPrefix(m, "vandp", "vandnp", "vorp", "vxorp", "vrangep", "vreducep", "vfpclassp", "vpmovm2d", "vpmovm2q", "vpmovd2m", "vpmovq2m"),
			regexp.MustCompile(`^v(broadcast|insert|extract)[fi](32x2|32x8|64x2)$`).MatchString(m):
			add("avx512dq")
		}
	}
	if strings.HasPrefix(m, "k") && maskOperand.MatchString(ops) {
		switch m[len(m)-1] {
		case 'd', 'q':
			add("avx512bw")
		case 'b':
			add("avx512dq")
		}
	}
	if vex && strings.Contains(ops, "%ymm") && strings.HasPrefix(m, "vp") && !hasAnyPrefix(m, "vpermil", "vperm2f128", "vptest") ||
		vex && (hasAnyPrefix(m, "vpbroadcast", "vinserti128", "vextracti128", "vperm2i128", "vpermd", "vpermq", "vpermps", "vpermpd", "vpblendd",
			"vpsllv", "vpsrlv", "vpsrav", "vgather", "vpgather", "vpmaskmov") ||
			hasAnyPrefix(m, "vbroadcastss", "vbroadcastsd") && strings.HasPrefix(ops, "%xmm")) {
		add("avx2")
	}
	return f
}

// TestInstructionFeatures pins the mapping on instructions of each family.
func TestInstructionFeatures(t *testing.T) {
	for line, want := range map[string][]string{
		"  10: c4 e2 7d 13 07                vcvtph2ps (%rdi), %ymm0":            {"avx", "f16c"},
		"  10: 62 f6 7d 28 13 07             vcvtph2psx (%rdi), %ymm0":           {"avx512f", "avx512vl", "avx512_fp16"},
		"  0: 62 f1 7c 48 58 c1              vaddps %zmm1, %zmm0, %zmm0":         {"avx512f"},
		"  0: c5 fc 58 c1                    vaddps %ymm1, %ymm0, %ymm0":         {"avx"},
		"  0: c5 fd fe c1                    vpaddd %ymm1, %ymm0, %ymm0":         {"avx", "avx2"},
		"  0: c4 e2 7d a8 c1                 vfmadd213ps %ymm1, %ymm0, %ymm0":    {"avx", "fma"},
		"  0: 62 f2 7d 48 50 c1              vpdpbusd %zmm1, %zmm0, %zmm0":       {"avx512f", "avx512_vnni"},
		"  0: c4 e2 7d 50 c1                 {vex} vpdpbusd %ymm1, %ymm0, %ymm0": {"avx", "avx_vnni", "avx2"},
		"  0: c4 e2 73 5e c2                 tdpbusd %tmm1, %tmm2, %tmm0":        {"amx_int8"},
		"  0: 62 f1 7d 48 fc c1              vpaddb %zmm1, %zmm0, %zmm0":         {"avx512f", "avx512bw"},
		"  0: 62 f1 7c 49 58 c1              vaddps %zmm1, %zmm0, %zmm0 {%k1}":   {"avx512f"},
		"  0: 62 f2 7e 48 30 c1              vpmovwb %zmm0, %ymm1":               {"avx512f", "avx512bw"},
		"  0: 62 f2 7e 48 35 c1              vpmovqd %zmm0, %ymm1":               {"avx512f"},
		"  0: f3 48 0f b8 c7                 popcntq %rdi, %rax":                 {"popcnt"},
		"  0: c4 e2 f9 f7 c7                 shlxq %rax, %rdi, %rax":             {"bmi2"},
		"  0: 62 e1 7c 28 58 c1              vaddps %ymm1, %ymm16, %ymm16":       {"avx512f", "avx512vl"},
		"  0: 62 f2 7e 48 72 c1              vcvtneps2bf16 %zmm1, %ymm0":         {"avx512f", "avx512_bf16"},
	} {
		in, ok := parseInstruction(line)
		if !ok {
			t.Errorf("%q: not parsed", line)
			continue
		}
		if got := in.features(); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%q: features %v, want %v", line, got, want)
		}
	}
}
