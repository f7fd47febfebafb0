package opcase

// The op cases every backend's op table runs (codegen/cpu's on the engine,
// codegen/kernel's on its evaluator), filed by family in cases_*.go:
// together they cover every element type each op declares, with NaN, ±Inf,
// empty tensors, negative axes and the edges of each op's numerics.
var families = []map[string][]string{
	elementwiseCases, reduceCases, indexCases, linalgCases, convCases, quantCases, rnnCases, shapeCases, nanCases, signalCases, mlCases, randomCases,
}

// Cases returns each op's case lines (Parse syntax), keyed by op type; the
// map is the caller's.
func Cases() map[string][]string {
	out := map[string][]string{}
	for _, rows := range families {
		for op, lines := range rows {
			out[op] = append(out[op], lines...)
		}
	}
	return out
}
