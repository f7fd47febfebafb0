package autodiff

// The string ops (ir/ops text.go).

func init() {
	notDifferentiable("", "it computes on strings, or counts them", "StringConcat", "StringSplit", "StringNormalizer", "RegexFullMatch", "TfIdfVectorizer")
}
