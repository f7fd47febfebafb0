package ops

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kiln-ml/kiln/ir"
)

// Text ops: StringConcat, StringSplit, StringNormalizer, RegexFullMatch
// and TfIdfVectorizer. Splitting and case follow Python's str methods,
// which ONNX's reference uses; patterns are RE2, as ONNX specifies and Go's
// regexp implements.

var stringTypes = []ir.DType{ir.String}

var textOps = []*Schema{
	{Name: "StringConcat", Since: 20, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: stringTypes, Infer: inferStringConcat, Run: runStringConcat},
	{Name: "StringSplit", Since: 20, MinInputs: 1, MaxInputs: 1, MinOutputs: 2, MaxOutputs: 2,
		Attrs: []AttrDef{{Name: "delimiter", Kind: ir.AttrString}, {Name: "maxsplit", Kind: ir.AttrInt}},
		Types: stringTypes, Infer: inferStringSplit, Run: runStringSplit},
	{Name: "StringNormalizer", Since: 10, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defString("case_change_action", "NONE"), defInt("is_case_sensitive", 0),
			{Name: "locale", Kind: ir.AttrString}, {Name: "stopwords", Kind: ir.AttrStrings}},
		Types: stringTypes, Infer: inferStringNormalizer, Run: runStringNormalizer},
	{Name: "RegexFullMatch", Since: 20, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "pattern", Kind: ir.AttrString}},
		Types: stringTypes, Infer: inferRegexFullMatch, Run: runRegexFullMatch},
	{Name: "TfIdfVectorizer", Since: 9, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{
			{Name: "max_gram_length", Kind: ir.AttrInt, Required: true}, {Name: "max_skip_count", Kind: ir.AttrInt, Required: true},
			{Name: "min_gram_length", Kind: ir.AttrInt, Required: true}, {Name: "mode", Kind: ir.AttrString, Required: true},
			{Name: "ngram_counts", Kind: ir.AttrInts, Required: true}, {Name: "ngram_indexes", Kind: ir.AttrInts, Required: true},
			{Name: "pool_int64s", Kind: ir.AttrInts}, {Name: "pool_strings", Kind: ir.AttrStrings}, {Name: "weights", Kind: ir.AttrFloats},
		},
		Types: []ir.DType{ir.Int32, ir.Int64, ir.String}, Infer: inferTfIdf, Run: runTfIdf},
}

func init() { register(textOps) }

// wantStrings checks that input i, where its type is known, holds strings.
func wantStrings(c *InferContext, i int) error {
	if e := c.In(i).Elem; e != ir.Undefined && e != ir.String {
		return c.Errorf("input %d is %s, want string", i, e)
	}
	return nil
}

// --- StringConcat ----------------------------------------------------------------

func inferStringConcat(c *InferContext) error {
	for i := range 2 {
		if err := wantStrings(c, i); err != nil {
			return err
		}
	}
	s, err := broadcastTypes(c.In(0), c.In(1))
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(ir.String, s))
	return nil
}

func runStringConcat(c *KernelContext) error {
	a, b := c.In(0), c.In(1)
	if a.DType != ir.String || b.DType != ir.String {
		return c.Errorf("inputs are %s and %s, want strings", a.DType, b.DType)
	}
	dims, idx, err := broadcastTensors(a, b)
	if err != nil {
		return c.Errorf("%v", err)
	}
	out := ir.NewTensor(ir.String, dims...)
	for k := range out.Strings {
		out.Strings[k] = a.Strings[idx[0][k]] + b.Strings[idx[1][k]]
	}
	c.Set(0, out)
	return nil
}

// --- StringSplit -----------------------------------------------------------------

func inferStringSplit(c *InferContext) error {
	if err := wantStrings(c, 0); err != nil {
		return err
	}
	x := c.In(0).Shape
	if !x.Ranked {
		c.Set(0, ir.TensorType(ir.String, ir.Shape{}))
		c.Set(1, ir.TensorType(ir.Int64, ir.Shape{}))
		return nil
	}
	width := ir.UnknownDim()
	if t := c.Const(0); t != nil && t.DType == ir.String {
		_, w := splitAll(c.attrs, t.Strings)
		width = ir.D(int64(w))
	}
	c.Set(0, ir.TensorType(ir.String, ir.ShapeOf(append(x.Clone().Dims, width)...)))
	c.Set(1, ir.TensorType(ir.Int64, x.Clone()))
	return nil
}

// splitAll splits each string as the node says, and returns the most
// fields of any.
func splitAll(a attrs, strs []string) (parts [][]string, width int) {
	maxsplit := int64(-1) // Python's: no limit
	if a.Has("maxsplit") {
		maxsplit = a.Int("maxsplit")
	}
	parts = make([][]string, len(strs))
	for i, s := range strs {
		parts[i] = splitString(s, a.String("delimiter"), maxsplit)
		width = max(width, len(parts[i]))
	}
	return parts, width
}

// pySpace is Python's str.isspace, which str.split() splits on: Unicode
// white space and the separators U+001C to U+001F.
func pySpace(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f }

// splitFields is Python's s.split(None, maxsplit): runs of white space
// separate fields, leading and trailing white space gives none, and after
// maxsplit splits (when maxsplit >= 0) the rest, its leading white space
// dropped, is the last field.
func splitFields(s string, maxsplit int64) []string {
	var out []string
	i := 0
	for {
		for i < len(s) {
			r, w := utf8.DecodeRuneInString(s[i:])
			if !pySpace(r) {
				break
			}
			i += w
		}
		if i == len(s) {
			return out
		}
		if maxsplit >= 0 && int64(len(out)) == maxsplit {
			return append(out, s[i:])
		}
		j := i
		for j < len(s) {
			r, w := utf8.DecodeRuneInString(s[j:])
			if pySpace(r) {
				break
			}
			j += w
		}
		out, i = append(out, s[i:j]), j
	}
}

// splitString is Python's s.split(sep, maxsplit), white space when sep is
// "" (ONNX's empty or absent delimiter).
func splitString(s, sep string, maxsplit int64) []string {
	if sep == "" {
		return splitFields(s, maxsplit)
	}
	n := -1
	if maxsplit >= 0 {
		n = int(min(maxsplit, int64(len(s)))) + 1
	}
	return strings.SplitN(s, sep, n)
}

// runStringSplit splits each string; substrings pads each row with "" to
// the most fields of any string, and length counts each one's fields.
func runStringSplit(c *KernelContext) error {
	x := c.In(0)
	if x.DType != ir.String {
		return c.Errorf("input is %s, want string", x.DType)
	}
	parts, width := splitAll(c.attrs, x.Strings)
	sub := ir.NewTensor(ir.String, append(slices.Clone(x.Dims), int64(width))...)
	length := ir.NewTensor(ir.Int64, x.Dims...)
	for i, p := range parts {
		copy(sub.Strings[i*width:], p)
		length.Int64s()[i] = int64(len(p))
	}
	c.Set(0, sub)
	c.Set(1, length)
	return nil
}

// --- StringNormalizer ------------------------------------------------------------

// normalizerArgs checks StringNormalizer's attributes.
func normalizerArgs(a attrs) (action string, err error) {
	action = a.String("case_change_action")
	switch action {
	case "LOWER", "UPPER", "NONE":
		return action, nil
	}
	return "", fmt.Errorf("case_change_action is %q, want LOWER, UPPER or NONE", action)
}

// normalizerRank checks StringNormalizer's input shape: [C] or [1, C].
func normalizerRank(s ir.Shape) error {
	switch {
	case !s.Ranked, s.Rank() == 1:
		return nil
	case s.Rank() == 2 && (!s.Dims[0].IsStatic() || s.Dims[0].Value == 1):
		return nil
	}
	return fmt.Errorf("input has shape %s, want [C] or [1, C]", s)
}

func inferStringNormalizer(c *InferContext) error {
	if err := wantStrings(c, 0); err != nil {
		return err
	}
	action, err := normalizerArgs(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	x := c.In(0).Shape
	if err := normalizerRank(x); err != nil {
		return c.Errorf("%v", err)
	}
	out := x.Clone()
	if out.Ranked {
		out.Dims[out.Rank()-1] = ir.UnknownDim() // stop words drop elements
		switch t := c.Const(0); {
		case t != nil && t.DType == ir.String:
			out.Dims[out.Rank()-1] = ir.D(int64(len(normalizeStrings(c.attrs, action, t.Strings))))
		case len(c.Strings("stopwords")) == 0:
			out.Dims[out.Rank()-1] = x.Dims[x.Rank()-1]
		}
	}
	c.Set(0, ir.TensorType(ir.String, out))
	return nil
}

// normalizeStrings drops the stop words (case-insensitively unless
// is_case_sensitive, by Unicode simple case folding), then changes case
// by Unicode's default mappings (locale is accepted and does not change
// them). When nothing is left, one empty string is.
func normalizeStrings(a attrs, action string, strs []string) []string {
	sensitive := a.Int("is_case_sensitive") != 0
	stop := func(s string) bool {
		for _, w := range a.Strings("stopwords") {
			if s == w || !sensitive && strings.EqualFold(s, w) {
				return true
			}
		}
		return false
	}
	var kept []string
	for _, s := range strs {
		if stop(s) {
			continue
		}
		switch action {
		case "LOWER":
			s = strings.ToLower(s)
		case "UPPER":
			s = strings.ToUpper(s)
		}
		kept = append(kept, s)
	}
	if len(kept) == 0 {
		kept = []string{""}
	}
	return kept
}

// runStringNormalizer normalizes [C] or [1, C] strings (normalizeStrings).
func runStringNormalizer(c *KernelContext) error {
	x := c.In(0)
	if x.DType != ir.String {
		return c.Errorf("input is %s, want string", x.DType)
	}
	action, err := normalizerArgs(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if err := normalizerRank(x.Shape()); err != nil {
		return c.Errorf("%v", err)
	}
	kept := normalizeStrings(c.attrs, action, x.Strings)
	dims := []int64{int64(len(kept))}
	if len(x.Dims) == 2 {
		dims = []int64{1, int64(len(kept))}
	}
	out := ir.NewTensor(ir.String, dims...)
	copy(out.Strings, kept)
	c.Set(0, out)
	return nil
}

// --- RegexFullMatch --------------------------------------------------------------

// fullMatcher compiles RegexFullMatch's pattern, anchored at both ends.
func fullMatcher(a attrs) (*regexp.Regexp, error) {
	if !a.Has("pattern") {
		return nil, fmt.Errorf("attribute pattern is missing")
	}
	p := a.String("pattern")
	re, err := regexp.Compile(`\A(?:` + p + `)\z`)
	if err != nil {
		return nil, fmt.Errorf("pattern %q is not a valid RE2 expression: %v", p, err)
	}
	return re, nil
}

func inferRegexFullMatch(c *InferContext) error {
	if err := wantStrings(c, 0); err != nil {
		return err
	}
	if _, err := fullMatcher(c.attrs); err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(ir.Bool, c.In(0).Shape.Clone()))
	return nil
}

func runRegexFullMatch(c *KernelContext) error {
	x := c.In(0)
	if x.DType != ir.String {
		return c.Errorf("input is %s, want string", x.DType)
	}
	re, err := fullMatcher(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	out := make([]bool, len(x.Strings))
	for i, s := range x.Strings {
		out[i] = re.MatchString(s)
	}
	c.Set(0, FromBools(x.Dims, out))
	return nil
}

// --- TfIdfVectorizer -------------------------------------------------------------

// tfIdf is a TfIdfVectorizer's pool resolved: each n-gram's key (its
// tokens, encoded) maps to its position in ngram_indexes.
type tfIdf struct {
	minN, maxN, maxSkip int
	mode                string
	strings             bool // the pool holds strings (else integers)
	grams               map[string]int
	indexes             []int64
	weights             []float32
	width               int64 // max(ngram_indexes) + 1
	// intGrams are an integer pool's n-grams in pool order (TfIdfSpec).
	intGrams [][]int64
}

// gramKey encodes n tokens so that distinct n-grams (of any n) differ.
func gramKey(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString(fmt.Sprintf("%d:", len(t)))
		b.WriteString(t)
	}
	return b.String()
}

// intToken is an integer token's key: its 8 bytes.
func intToken(v int64) string {
	return string(binary.LittleEndian.AppendUint64(nil, uint64(v)))
}

func tfIdfOf(a attrs) (*tfIdf, error) {
	t := &tfIdf{minN: int(a.Int("min_gram_length")), maxN: int(a.Int("max_gram_length")), maxSkip: int(a.Int("max_skip_count")),
		mode: a.String("mode"), indexes: a.Ints("ngram_indexes"), weights: a.Floats("weights"), grams: map[string]int{}}
	switch {
	case t.mode != "TF" && t.mode != "IDF" && t.mode != "TFIDF":
		return nil, fmt.Errorf("mode is %q, want TF, IDF or TFIDF", t.mode)
	case t.minN < 1 || t.maxN < t.minN:
		return nil, fmt.Errorf("min_gram_length %d and max_gram_length %d must satisfy 1 <= min <= max", t.minN, t.maxN)
	case t.maxSkip < 0:
		return nil, fmt.Errorf("max_skip_count is %d, want 0 or more", t.maxSkip)
	case a.Has("pool_int64s") == a.Has("pool_strings"):
		return nil, fmt.Errorf("exactly one of pool_int64s and pool_strings must be set")
	case len(t.weights) != 0 && len(t.weights) != len(t.indexes):
		return nil, fmt.Errorf("weights has %d entries for %d n-grams", len(t.weights), len(t.indexes))
	}
	var pool []string
	if t.strings = a.Has("pool_strings"); t.strings {
		pool = a.Strings("pool_strings")
	} else {
		for _, v := range a.Ints("pool_int64s") {
			pool = append(pool, intToken(v))
		}
	}
	counts := a.Ints("ngram_counts")
	gram := 0
	for level, start := range counts {
		n := level + 1
		end := int64(len(pool))
		if level+1 < len(counts) {
			end = counts[level+1]
		}
		if start < 0 || end < start || end > int64(len(pool)) || (end-start)%int64(n) != 0 {
			return nil, fmt.Errorf("ngram_counts %v does not divide a pool of %d into whole n-grams", ir.FormatList(counts), len(pool))
		}
		for p := start; p < end; p += int64(n) {
			if gram >= len(t.indexes) {
				return nil, fmt.Errorf("ngram_indexes has %d entries, fewer than the pool's n-grams", len(t.indexes))
			}
			t.grams[gramKey(pool[p:p+int64(n)])] = gram
			if !t.strings {
				t.intGrams = append(t.intGrams, a.Ints("pool_int64s")[p:p+int64(n)])
			}
			gram++
		}
	}
	if gram != len(t.indexes) {
		return nil, fmt.Errorf("ngram_indexes has %d entries for the pool's %d n-grams", len(t.indexes), gram)
	}
	for _, i := range t.indexes {
		if i < 0 {
			return nil, fmt.Errorf("ngram_indexes has a negative entry %d", i)
		}
		t.width = max(t.width, i+1)
	}
	return t, nil
}

// checkInput checks the input's type and rank against the pool.
func (t *tfIdf) checkInput(elem ir.DType, rank int) error {
	if elem != ir.Undefined && (elem == ir.String) != t.strings {
		pool := "pool_int64s"
		if t.strings {
			pool = "pool_strings"
		}
		return fmt.Errorf("input is %s, which %s cannot match", elem, pool)
	}
	if rank > 2 || rank == 0 {
		return fmt.Errorf("input has rank %d, want [C] or [N, C]", rank)
	}
	return nil
}

func inferTfIdf(c *InferContext) error {
	t, err := tfIdfOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	x := c.In(0)
	rank := -1
	if x.Shape.Ranked {
		rank = x.Shape.Rank()
	}
	if err := t.checkInput(x.Elem, max(rank, 1)); err != nil {
		return c.Errorf("%v", err)
	}
	switch rank {
	case -1:
		c.Set(0, ir.TensorType(ir.Float32, ir.Shape{}))
	case 1:
		c.Set(0, ir.TensorType(ir.Float32, ir.S(t.width)))
	default:
		c.Set(0, ir.TensorType(ir.Float32, ir.ShapeOf(x.Shape.Dims[0], ir.D(t.width))))
	}
	return nil
}

// runTfIdf counts, in each row, every n-gram of the pool with n from
// min_gram_length to max_gram_length and gaps of up to max_skip_count
// tokens between its items (1-grams once, whatever the skip), then weighs
// the counts by mode.
// TfIdf is a TfIdfVectorizer node of an integer pool resolved for a
// compiler: its n-grams in pool order, each with its output index and
// weight (none: 1), counted as runTfIdf counts them.
type TfIdf struct {
	MinN, MaxN, MaxSkip int
	Mode                string
	Grams               [][]int64
	Indexes             []int64
	Weights             []float32
	Width               int64
}

// TfIdfSpec resolves a TfIdfVectorizer node; a pool of strings is
// refused (engines bind no strings).
func (c *KernelContext) TfIdfSpec() (*TfIdf, error) {
	t, err := tfIdfOf(c.attrs)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	if t.strings {
		return nil, c.Errorf("a pool of strings")
	}
	return &TfIdf{MinN: t.minN, MaxN: t.maxN, MaxSkip: t.maxSkip, Mode: t.mode, Grams: t.intGrams, Indexes: t.indexes, Weights: t.weights, Width: t.width}, nil
}

func runTfIdf(c *KernelContext) error {
	t, err := tfIdfOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	if err := t.checkInput(x.DType, len(x.Dims)); err != nil {
		return c.Errorf("%v", err)
	}
	tokens := x.Strings
	if !t.strings {
		tokens = make([]string, x.Len())
		for i, v := range Int64s(x) {
			tokens[i] = intToken(v)
		}
	}
	rows, cols := int64(1), x.Dims[len(x.Dims)-1]
	if len(x.Dims) == 2 {
		rows = x.Dims[0]
	}
	out := make([]float64, rows*t.width)
	counts := make([]float64, len(t.indexes))
	gram := make([]string, t.maxN)
	for r := int64(0); r < rows; r++ {
		row := tokens[r*cols : (r+1)*cols]
		clear(counts)
		for skip := 0; skip <= t.maxSkip; skip++ {
			for start := range row {
				for n := t.minN; n <= t.maxN; n++ {
					if n == 1 && skip > 0 {
						continue // a 1-gram has no gaps to skip
					}
					last := start + (n-1)*(skip+1)
					if last >= len(row) {
						break
					}
					for k := range n {
						gram[k] = row[start+k*(skip+1)]
					}
					if g, ok := t.grams[gramKey(gram[:n])]; ok {
						counts[g]++
					}
				}
			}
		}
		for g, n := range counts {
			w := 1.0
			if len(t.weights) > 0 {
				w = float64(t.weights[g])
			}
			switch t.mode {
			case "IDF":
				n = min(n, 1) * w
			case "TFIDF":
				n *= w
			}
			out[r*t.width+t.indexes[g]] += n
		}
	}
	dims := []int64{t.width}
	if len(x.Dims) == 2 {
		dims = []int64{rows, t.width}
	}
	c.Set(0, FromFloat64s(ir.Float32, dims, out))
	return nil
}
