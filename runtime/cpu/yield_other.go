//go:build !linux

package cpu

import "runtime"

// osYield lets other goroutines run (the OS thread keeps its core).
func osYield() { runtime.Gosched() }
