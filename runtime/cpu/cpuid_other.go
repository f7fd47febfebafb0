//go:build !amd64

package cpu

func hostF16C() bool       { return false }
func hostAVX512FP16() bool { return false }
func hostPrefetchW() bool  { return false }
