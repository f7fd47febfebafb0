package ops

// Ellipsis reports whether Einsum label l is an axis an ellipsis stands
// for (one that broadcasts), not a letter.
func (e *Einsum) Ellipsis(l int) bool { return l >= einsumLetters }
