//go:build !amd64

package cpuabi

func hostF16C() bool       { return false }
func hostAVX512FP16() bool { return false }
func hostPrefetchW() bool  { return false }
