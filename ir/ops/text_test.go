package ops

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

func TestStringConcat(t *testing.T) {
	a := strs([]int64{2, 1}, "x", "ü")
	b := strs([]int64{3}, "1", "", "β")
	out, err := callKernel(t, "StringConcat", 20, []*ir.Tensor{a, b}, 1)
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 3}, out[0].Dims)
	assert.Equal(t, []string{"x1", "x", "xβ", "ü1", "ü", "üβ"}, out[0].Strings)
	_, err = callKernel(t, "StringConcat", 20, []*ir.Tensor{a, vec(ir.Int64, int64(1))}, 1)
	assert.ErrorContains(t, err, "want string")
	_, err = callKernel(t, "StringConcat", 20, []*ir.Tensor{strs([]int64{2, 3}, "a", "b", "c", "d", "e", "f"), strs([]int64{4}, "a", "b", "c", "d")}, 1)
	assert.ErrorContains(t, err, "broadcast")
}

func TestStringSplit(t *testing.T) {
	for _, c := range []struct {
		in    string
		attrs []*ir.Attribute
		want  []string
	}{
		// Python's str.split, white space: runs separate, ends give nothing,
		// the rest after maxsplit keeps its trailing space.
		{"  a  b  c ", nil, []string{"a", "b", "c"}},
		{"  a  b  c ", []*ir.Attribute{ir.AttrI("maxsplit", 1)}, []string{"a", "b  c "}},
		{"a\tb\u00a0c\x1fd", nil, []string{"a", "b", "c", "d"}},
		{"", nil, nil},
		{"   ", []*ir.Attribute{ir.AttrS("delimiter", "")}, nil},
		// An explicit delimiter: every occurrence, empty fields kept.
		{"a,,b,", []*ir.Attribute{ir.AttrS("delimiter", ",")}, []string{"a", "", "b", ""}},
		{"", []*ir.Attribute{ir.AttrS("delimiter", ",")}, []string{""}},
		{"1ab2ab3", []*ir.Attribute{ir.AttrS("delimiter", "ab"), ir.AttrI("maxsplit", 1)}, []string{"1", "2ab3"}},
		{"a,b", []*ir.Attribute{ir.AttrS("delimiter", ","), ir.AttrI("maxsplit", 0)}, []string{"a,b"}},
		{"a,b,c", []*ir.Attribute{ir.AttrS("delimiter", ","), ir.AttrI("maxsplit", -1)}, []string{"a", "b", "c"}},
	} {
		out, err := callKernel(t, "StringSplit", 20, []*ir.Tensor{strs([]int64{1}, c.in)}, 2, c.attrs...)
		require.NoError(t, err, "%q", c.in)
		assert.Equal(t, []int64{1, int64(len(c.want))}, out[0].Dims, "%q", c.in)
		if len(c.want) > 0 {
			assert.Equal(t, c.want, out[0].Strings, "%q", c.in)
		}
		assert.Equal(t, []int64{int64(len(c.want))}, out[1].Int64s(), "%q", c.in)
	}
	// Rows pad to the longest; an empty input gives empty outputs.
	out, err := callKernel(t, "StringSplit", 20, []*ir.Tensor{strs([]int64{2, 1}, "a b c", "d")}, 2)
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 1, 3}, out[0].Dims)
	assert.Equal(t, []string{"a", "b", "c", "d", "", ""}, out[0].Strings)
	assert.Equal(t, []int64{3, 1}, out[1].Int64s())
	out, err = callKernel(t, "StringSplit", 20, []*ir.Tensor{strs([]int64{0})}, 2)
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0}, out[0].Dims)
	_, err = callKernel(t, "StringSplit", 20, []*ir.Tensor{vec(ir.Float32, float32(1))}, 2)
	assert.ErrorContains(t, err, "want string")
}

func TestStringNormalizer(t *testing.T) {
	x := strs([]int64{5}, "Monday", "tuesday", "MONDAY", "Straße", "wed")
	run := func(x *ir.Tensor, attrs ...*ir.Attribute) *ir.Tensor {
		t.Helper()
		out, err := callKernel(t, "StringNormalizer", 10, []*ir.Tensor{x}, 1, attrs...)
		require.NoError(t, err)
		return out[0]
	}
	stop := ir.AttrSs("stopwords", "monday", "WED")
	// Unicode's simple case mappings: ß has no one-letter upper case.
	assert.Equal(t, []string{"TUESDAY", "STRAßE"}, run(x, stop, ir.AttrS("case_change_action", "UPPER")).Strings)
	assert.Equal(t, []string{"tuesday", "straße"}, run(x, stop, ir.AttrS("case_change_action", "LOWER")).Strings)
	assert.Equal(t, []string{"Monday", "tuesday", "MONDAY", "Straße"}, run(x, ir.AttrSs("stopwords", "wed"), ir.AttrI("is_case_sensitive", 1)).Strings)
	assert.Equal(t, []string{"Monday", "tuesday", "MONDAY", "Straße", "wed"}, run(x).Strings, "no stop words, no change")
	// [1, C] stays two-dimensional, also when everything is dropped.
	row := strs([]int64{1, 2}, "a", "A")
	got := run(row, ir.AttrSs("stopwords", "a"))
	assert.Equal(t, []int64{1, 1}, got.Dims)
	assert.Equal(t, []string{""}, got.Strings)
	got = run(strs([]int64{2}, "a", "A"), ir.AttrSs("stopwords", "a"))
	assert.Equal(t, []int64{1}, got.Dims)

	_, err := callKernel(t, "StringNormalizer", 10, []*ir.Tensor{x}, 1, ir.AttrS("case_change_action", "TITLE"))
	assert.ErrorContains(t, err, `case_change_action is "TITLE"`)
	_, err = callKernel(t, "StringNormalizer", 10, []*ir.Tensor{strs([]int64{2, 1}, "a", "b")}, 1)
	assert.ErrorContains(t, err, "want [C] or [1, C]")
	types, err := callInfer("StringNormalizer", 10, []ir.Type{sym(ir.String, 1, "C")}, nil, 1, stop)
	require.NoError(t, err)
	assert.Equal(t, "string[1,?]", types[0].String())
}

func TestRegexFullMatch(t *testing.T) {
	x := strs([]int64{2, 2}, "ab", "abc", "a1@gmail.com", "")
	for pattern, want := range map[string]string{
		"ab":                        "[true false false false]",
		"a.*":                       "[true true true false]",
		`[\w.]+@(yahoo|gmail)\.com`: "[false false true false]",
		"(ab)?":                     "[true false false true]",
		"a|abc":                     "[false true false false]", // the whole string, not a prefix
	} {
		out, err := callKernel(t, "RegexFullMatch", 20, []*ir.Tensor{x}, 1, ir.AttrS("pattern", pattern))
		require.NoError(t, err, pattern)
		assert.Equal(t, []int64{2, 2}, out[0].Dims)
		assert.Equal(t, want, elems(out[0]), pattern)
	}
	_, err := callKernel(t, "RegexFullMatch", 20, []*ir.Tensor{x}, 1, ir.AttrS("pattern", "a(b"))
	assert.ErrorContains(t, err, `pattern "a(b" is not a valid RE2 expression`)
	_, err = callKernel(t, "RegexFullMatch", 20, []*ir.Tensor{x}, 1, ir.AttrS("pattern", `(a)\1`))
	assert.ErrorContains(t, err, "not a valid RE2", "backreferences are not RE2")
	_, err = callKernel(t, "RegexFullMatch", 20, []*ir.Tensor{x}, 1)
	assert.ErrorContains(t, err, "pattern is missing")
}

// countGrams is the definition of TfIdfVectorizer's counts, by brute
// force: every position tuple p, p+d, ..., p+(n-1)d with gap d from 1 to
// max_skip+1 (1-grams once each) whose tokens are an n-gram of the pool.
func countGrams(row []int64, pool [][]int64, minN, maxN, maxSkip int) []float64 {
	counts := make([]float64, len(pool))
	for g, gram := range pool {
		n := len(gram)
		if n < minN || n > maxN {
			continue
		}
		gaps := maxSkip + 1
		if n == 1 {
			gaps = 1
		}
		for d := 1; d <= gaps; d++ {
			for p := 0; p+(n-1)*d < len(row); p++ {
				match := true
				for k := range n {
					match = match && row[p+k*d] == gram[k]
				}
				if match {
					counts[g]++
				}
			}
		}
	}
	return counts
}

func TestTfIdfVectorizer(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	row := make([]int64, 30)
	for i := range row {
		row[i] = int64(rng.IntN(4))
	}
	// Pool: 1-grams 0, 3; 2-grams (1 2), (0 0), (3 1); 3-grams (0 1 2).
	pool := [][]int64{{0}, {3}, {1, 2}, {0, 0}, {3, 1}, {0, 1, 2}}
	// attrs are the node's attributes; extra ones replace those of their
	// name or add to them.
	attrs := func(minN, maxN, skip int64, mode string, extra ...*ir.Attribute) []*ir.Attribute {
		list := []*ir.Attribute{ir.AttrI("min_gram_length", minN), ir.AttrI("max_gram_length", maxN), ir.AttrI("max_skip_count", skip),
			ir.AttrS("mode", mode), ir.AttrIs("ngram_counts", 0, 2, 8), ir.AttrIs("ngram_indexes", 5, 4, 3, 2, 1, 0),
			ir.AttrIs("pool_int64s", 0, 3, 1, 2, 0, 0, 3, 1, 0, 1, 2)}
		for _, e := range extra {
			list = slices.DeleteFunc(list, func(a *ir.Attribute) bool { return a.Name == e.Name })
			list = append(list, e)
		}
		return list
	}
	weights := []float32{0.5, 2, 1, 3, 0.25, 4}
	x := ir.FromSlice(ir.Int32, []int64{2, 15}, func() []int32 {
		v := make([]int32, len(row))
		for i, r := range row {
			v[i] = int32(r)
		}
		return v
	}())
	for _, c := range []struct {
		minN, maxN, skip int64
		mode             string
	}{{1, 3, 0, "TF"}, {2, 2, 3, "TF"}, {1, 3, 2, "IDF"}, {1, 2, 5, "TFIDF"}, {3, 3, 1, "TF"}} {
		out, err := callKernel(t, "TfIdfVectorizer", 9, []*ir.Tensor{x}, 1, attrs(c.minN, c.maxN, c.skip, c.mode, ir.AttrFs("weights", weights...))...)
		require.NoError(t, err, "%+v", c)
		require.Equal(t, []int64{2, 6}, out[0].Dims)
		got := Float64s(out[0])
		for r := range 2 {
			counts := countGrams(row[r*15:(r+1)*15], pool, int(c.minN), int(c.maxN), int(c.skip))
			for g, n := range counts {
				switch c.mode {
				case "IDF":
					n = min(n, 1) * float64(weights[g])
				case "TFIDF":
					n *= float64(weights[g])
				}
				assert.Equal(t, n, got[r*6+5-g], "%+v row %d n-gram %v", c, r, pool[g])
			}
		}
	}
	// Strings, 1-D, and a level with no n-grams.
	s := strs([]int64{5}, "a", "b", "a", "b", "c")
	out, err := callKernel(t, "TfIdfVectorizer", 9, []*ir.Tensor{s}, 1, ir.AttrI("min_gram_length", 1), ir.AttrI("max_gram_length", 2),
		ir.AttrI("max_skip_count", 0), ir.AttrS("mode", "TF"), ir.AttrIs("ngram_counts", 0, 0), ir.AttrIs("ngram_indexes", 1, 0),
		ir.AttrSs("pool_strings", "a", "b", "b", "c"))
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 2}, Float64s(out[0]), "(b c) once, (a b) twice")

	for _, c := range []struct {
		x     *ir.Tensor
		attrs []*ir.Attribute
		want  string
	}{
		{x, attrs(1, 3, 0, "BM25"), `mode is "BM25"`},
		{x, attrs(2, 1, 0, "TF"), "1 <= min <= max"},
		{x, attrs(1, 2, -1, "TF"), "max_skip_count is -1"},
		{x, attrs(1, 2, 0, "TF", ir.AttrSs("pool_strings", "a")), "exactly one of pool_int64s and pool_strings"},
		{x, attrs(1, 2, 0, "TF", ir.AttrFs("weights", 1)), "weights has 1 entries for 6 n-grams"},
		{x, attrs(1, 2, 0, "TF", ir.AttrIs("ngram_counts", 0, 2, 7)), "does not divide a pool of 11"},
		{x, attrs(1, 2, 0, "TF", ir.AttrIs("ngram_counts", 0, 3)), "fewer than the pool's n-grams"},
		{s, attrs(1, 2, 0, "TF"), "input is string, which pool_int64s cannot match"},
		{ir.FromSlice(ir.Int32, []int64{1, 1, 2}, []int32{1, 2}), attrs(1, 2, 0, "TF"), "want [C] or [N, C]"},
	} {
		_, err := callKernel(t, "TfIdfVectorizer", 9, []*ir.Tensor{c.x}, 1, c.attrs...)
		assert.ErrorContains(t, err, c.want)
	}
}
