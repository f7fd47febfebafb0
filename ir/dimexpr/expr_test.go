package dimexpr

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustParse(t *testing.T, s string) *Expr {
	t.Helper()
	e, err := Parse(s)
	require.NoError(t, err)
	return e
}

func mustDiv(e *Expr, err error) *Expr {
	if err != nil {
		panic(err)
	}
	return e
}

func TestCanonicalForms(t *testing.T) {
	N, S := Sym("N"), Sym("S")
	for _, c := range []struct {
		got  *Expr
		want string
	}{
		{N.Add(S).Add(N), "2*N + S"},
		{S.Mul(N).Add(Const(1)).Sub(Const(3)), "N*S - 2"},
		{N.Mul(N).Mul(Const(3)), "3*N**2"},
		{Const(5).Sub(N), "-N + 5"},
		{N.Sub(N), "0"},
		{mustDiv(N.MulConst(2).AddConst(5).FloorDiv(Const(2))), "N + 2"},
		{mustDiv(N.MulConst(2).AddConst(1).FloorDiv(Const(4))), "N//2"},
		{mustDiv(N.AddConst(-1).FloorDiv(Const(2))), "(N + 1)//2 - 1"},
		{mustDiv(N.CeilDiv(Const(4))), "(N + 3)//4"},
		{mustDiv(mustDiv(N.AddConst(1).FloorDiv(Const(2))).AddConst(1).FloorDiv(Const(2))), "(N + 3)//4"},
		{mustDiv(N.Neg().FloorDiv(Const(2))), "-N + N//2"},
		{mustDiv(N.FloorDiv(Const(-2))), "-N + N//2"},
		{mustDiv(N.Mul(S).MulConst(64).FloorDiv(N.Mul(S))), "64"},
		{mustDiv(N.Mul(S).AddConst(1).Mul(N).FloorDiv(N)), "N*S + 1"},
		{mustDiv(N.Mul(N).Sub(S.Mul(S)).FloorDiv(N.Add(S))), "N - S"},
		{S.Mul(mustDiv(N.FloorDiv(Const(2)))).MulConst(3), "3*S*(N//2)"},
		{Min(N, Const(1)), "1"},
		{Min(N, N.AddConst(2), Const(7)), "min(7, N)"},
		{Max(N.AddConst(-1), Const(0)), "N - 1"},
		{Max(Min(S, Const(512)), S), "S"},
		{Min(Min(N, S), Const(3), N), "min(3, N, S)"},
		{Sym("batch size").MulConst(2), `2*"batch size"`},
		{Sym("seq-len").AddConst(1), "seq-len + 1"},
		{Sym("a\"b").MulConst(2), `2*"a\"b"`},
	} {
		assert.Equal(t, c.want, c.got.String())
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"N":                          "N",
		"batch size":                 "batch size", // not an expression: one symbol
		"N:0":                        "N:0",
		"s0*2":                       "2*s0",
		"2*s0":                       "2*s0",
		"past_sequence_length + 1":   "past_sequence_length + 1",
		"((s0 - 1)//2) + 1":          "(s0 + 1)//2",
		"floor(s0/2)":                "s0//2",
		"ceiling(s0/4)":              "(s0 + 3)//4",
		"CeilDiv(s0, 4)":             "(s0 + 3)//4",
		"Max(1, s0)":                 "s0",
		"Min(s0, 512)":               "min(512, s0)",
		"s0 % 3":                     "s0 - 3*(s0//3)",
		"Mod(s0, 3)":                 "s0 - 3*(s0//3)",
		"(N*S*4)/2":                  "2*N*S",
		"N-1":                        "N - 1",
		"seq-len":                    "seq-len",
		"-9223372036854775808":       "-9223372036854775808",
		"9223372036854775808":        "9223372036854775808", // out of range: a name
		"N/2":                        "N/2",                 // not an integer: a name
		`"batch size" + 1`:           `"batch size" + 1`,
		"x**2 - 1":                   "x**2 - 1",
		"input.1_dim_0":              "input.1_dim_0",
		"unk__123":                   "unk__123",
		"Addoutput_dim_0 * 3 + 2*N ": "3*Addoutput_dim_0 + 2*N",
	} {
		e := mustParse(t, in)
		assert.Equal(t, want, e.String(), "Parse(%q)", in)
	}
	_, err := Parse("")
	assert.Error(t, err)
	name := mustParse(t, "N/2")
	s, ok := name.Symbol()
	assert.True(t, ok)
	assert.Equal(t, "N/2", s)
	// A symbol whose name reads as an expression is quoted when alone.
	assert.Equal(t, `"2*N"`, Sym("2*N").String())
	assert.Equal(t, []string{"2*N"}, mustParse(t, `"2*N"`).Symbols())
}

func TestEvalAndTree(t *testing.T) {
	e := mustParse(t, "3*N*S + min(N, 4)*((S + 1)//2) - 7")
	env := map[string]int64{"N": 5, "S": 6}
	v, err := e.Eval(env)
	require.NoError(t, err)
	assert.Equal(t, int64(3*5*6+4*3-7), v)
	tv, err := e.Tree().Eval(env)
	require.NoError(t, err)
	assert.Equal(t, v, tv)
	assert.Equal(t, []string{"N", "S"}, e.Symbols())
	_, err = e.Eval(map[string]int64{"N": 1})
	assert.ErrorContains(t, err, "symbol S has no value")
	_, err = Sym("N").MulConst(1 << 40).Eval(map[string]int64{"N": 1 << 40})
	assert.ErrorContains(t, err, "overflows")
	// Floor division rounds toward negative infinity.
	v, err = mustParse(t, "(N - 10)//4").Eval(map[string]int64{"N": 1})
	require.NoError(t, err)
	assert.Equal(t, int64(-3), v)
	tree := mustParse(t, "2*(N//3) + S").Tree()
	assert.Equal(t, OpAdd, tree.Op)
	assert.Equal(t, Node{Op: OpSym, Name: "S"}, tree.Args[0])
	assert.Equal(t, Node{Op: OpMul, Args: []Node{{Op: OpConst, Value: 2}, {Op: OpFloorDiv, Args: []Node{{Op: OpSym, Name: "N"}, {Op: OpConst, Value: 3}}}}}, tree.Args[1])
}

func TestErrorsAndUnknowns(t *testing.T) {
	N := Sym("N")
	_, err := N.FloorDiv(Const(0))
	assert.ErrorContains(t, err, "by zero")
	_, err = N.FloorDiv(Sym("S"))
	assert.ErrorContains(t, err, "S does not divide N")
	var unknown *Expr
	assert.Nil(t, unknown.Add(N))
	assert.Nil(t, N.Mul(unknown))
	q, err := unknown.FloorDiv(Const(2))
	assert.Nil(t, q)
	assert.NoError(t, err)
	assert.Nil(t, Min(N, unknown))
	assert.Nil(t, Const(1<<62).MulConst(4), "overflow is unknown")
	assert.Equal(t, "?", unknown.String())
	assert.False(t, unknown.Equal(unknown))
}

// --- property tests ---------------------------------------------------------------

// genTree is a random expression built two ways: with the package's
// operations, and as a closure computing the same value directly.
type genTree struct {
	e    *Expr
	eval func(env map[string]int64) int64
	desc string
}

var syms = []string{"a", "b", "c"}

func floorDivRef(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func gen(rng *rand.Rand, depth int) genTree { return genOps(rng, depth, 8) }

// genPoly makes polynomials: sums, differences and products only.
func genPoly(rng *rand.Rand, depth int) genTree { return genOps(rng, depth, 3) }

func genOps(rng *rand.Rand, depth, ops int) genTree {
	if depth == 0 || rng.IntN(4) == 0 {
		if rng.IntN(2) == 0 {
			k := rng.Int64N(11) - 5
			return genTree{Const(k), func(map[string]int64) int64 { return k }, fmt.Sprint(k)}
		}
		s := syms[rng.IntN(len(syms))]
		return genTree{Sym(s), func(env map[string]int64) int64 { return env[s] }, s}
	}
	x, y := genOps(rng, depth-1, ops), genOps(rng, depth-1, ops)
	switch rng.IntN(ops) {
	case 0:
		return genTree{x.e.Add(y.e), func(env map[string]int64) int64 { return x.eval(env) + y.eval(env) }, "(" + x.desc + "+" + y.desc + ")"}
	case 1:
		return genTree{x.e.Sub(y.e), func(env map[string]int64) int64 { return x.eval(env) - y.eval(env) }, "(" + x.desc + "-" + y.desc + ")"}
	case 2:
		return genTree{x.e.Mul(y.e), func(env map[string]int64) int64 { return x.eval(env) * y.eval(env) }, "(" + x.desc + "*" + y.desc + ")"}
	case 3, 4:
		k := rng.Int64N(7) + 1
		if rng.IntN(4) == 0 {
			k = -k
		}
		q, err := x.e.FloorDiv(Const(k))
		if err != nil {
			panic(err)
		}
		return genTree{q, func(env map[string]int64) int64 { return floorDivRef(x.eval(env), k) }, fmt.Sprintf("(%s//%d)", x.desc, k)}
	case 5:
		k := rng.Int64N(5) + 1
		q, err := x.e.CeilDiv(Const(k))
		if err != nil {
			panic(err)
		}
		return genTree{q, func(env map[string]int64) int64 { return -floorDivRef(-x.eval(env), k) }, fmt.Sprintf("ceil(%s/%d)", x.desc, k)}
	case 6:
		return genTree{Min(x.e, y.e), func(env map[string]int64) int64 { return min(x.eval(env), y.eval(env)) }, "min(" + x.desc + "," + y.desc + ")"}
	}
	return genTree{Max(x.e, y.e), func(env map[string]int64) int64 { return max(x.eval(env), y.eval(env)) }, "max(" + x.desc + "," + y.desc + ")"}
}

func randEnv(rng *rand.Rand) map[string]int64 {
	env := map[string]int64{}
	for _, s := range syms {
		env[s] = rng.Int64N(40) + 1 // symbols are dims: at least 1
	}
	return env
}

// TestPropertyEval: an expression built with the operations evaluates to
// what the operations compute on the numbers, and so do its tree and its
// printed-then-parsed form.
func TestPropertyEval(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		g := gen(rng, 4)
		if g.e == nil {
			continue
		}
		p, err := parseStrict(g.e.String())
		require.NoError(t, err, "case %d: %s printed as %s", i, g.desc, g.e)
		require.Equal(t, g.e.String(), p.String(), "Parse∘String of %s", g.desc)
		for range 5 {
			env := randEnv(rng)
			want := g.eval(env)
			got, err := g.e.Eval(env)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s = %s at %v", g.desc, g.e, env)
			tv, err := g.e.Tree().Eval(env)
			require.NoError(t, err)
			require.Equal(t, want, tv, "tree of %s", g.e)
			pv, err := p.Eval(env)
			require.NoError(t, err)
			require.Equal(t, want, pv, "reparsed %s", g.e)
		}
	}
}

// TestPropertyCanonical: expressions equal by the laws of the algebra
// print equal, whichever way they were built.
func TestPropertyCanonical(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		x, y, z := gen(rng, 3).e, gen(rng, 3).e, gen(rng, 3).e
		if x == nil || y == nil || z == nil {
			continue
		}
		k := rng.Int64N(6) + 2
		same := func(a, b *Expr, law string) {
			if a == nil || b == nil { // too large
				return
			}
			require.Equal(t, a.String(), b.String(), "%s with x=%s y=%s z=%s k=%d", law, x, y, z, k)
		}
		same(x.Add(y), y.Add(x), "x+y = y+x")
		same(x.Mul(y), y.Mul(x), "xy = yx")
		same(x.Add(y).Add(z), x.Add(y.Add(z)), "associativity of +")
		same(x.Mul(y).Mul(z), x.Mul(y.Mul(z)), "associativity of *")
		same(x.Add(y).Mul(z), x.Mul(z).Add(y.Mul(z)), "distributivity")
		same(x.Add(y).Sub(y), x, "x+y-y = x")
		same(mustDiv(x.MulConst(k).FloorDiv(Const(k))), x, "kx//k = x")
		same(mustDiv(x.Add(y.MulConst(k)).FloorDiv(Const(k))), mustDiv(x.FloorDiv(Const(k))).Add(y), "(x+ky)//k = x//k + y")
		// Nested floor divisions merge; for a polynomial x the result is
		// the direct one (with floor divisions inside x it may not be: see
		// the package documentation).
		if p := genPoly(rng, 3).e; p != nil {
			same(mustDiv(mustDiv(p.FloorDiv(Const(k))).FloorDiv(Const(3))), mustDiv(p.FloorDiv(Const(3*k))), "p//k//3 = p//3k")
			same(mustDiv(mustDiv(mustDiv(p.FloorDiv(Const(k))).AddConst(1).FloorDiv(Const(2))).AddConst(2).FloorDiv(Const(3))),
				mustDiv(p.AddConst(k+2*2*k).FloorDiv(Const(6*k))), "((p//k + 1)//2 + 2)//3 = (p + 5k)//6k")
		}
		same(mustDiv(x.CeilDiv(Const(k))), mustDiv(x.AddConst(k-1).FloorDiv(Const(k))), "ceil(x/k) = (x+k-1)//k")
		same(Min(x, y), Min(y, x), "min commutes")
		same(Max(x, y, z), Max(z, Max(y, x)), "max associates")
		same(Min(x, x.AddConst(k)), x, "min(x, x+k) = x")
		if xy := x.Mul(y); xy != nil && !y.IsConst() {
			if q, err := xy.FloorDiv(y); err == nil {
				same(q, x, "xy//y = x")
			}
		}
	}
}

// TestPropertyGE: whatever GE proves holds on random values.
func TestPropertyGE(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	proven := 0
	for range 3000 {
		x, y := gen(rng, 3), gen(rng, 3)
		if x.e == nil || y.e == nil || !x.e.GE(y.e) {
			continue
		}
		proven++
		for range 10 {
			env := randEnv(rng)
			require.GreaterOrEqual(t, x.eval(env), y.eval(env), "%s >= %s at %v", x.e, y.e, env)
		}
	}
	assert.Greater(t, proven, 100, "GE should prove some random inequalities")
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"N", "2*N + 1", "(N + 3)//4", "min(N, 3)", `"a b"*2`, "floor(N/2)", "N**3", "-N", "((", "9223372036854775807*N*N"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		if s == "" {
			if err == nil {
				t.Fatal("empty string parsed")
			}
			return
		}
		if err != nil || e == nil {
			t.Fatalf("Parse(%q) = %v, %v", s, e, err)
		}
		again, err := Parse(e.String())
		if err != nil || again.String() != e.String() {
			t.Fatalf("Parse(%q) printed %q, which reparses as %v (%v)", s, e, again, err)
		}
	})
}
