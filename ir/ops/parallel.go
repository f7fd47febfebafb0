package ops

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// parallelFor calls f(i) for every i in [0, n) on up to GOMAXPROCS
// goroutines. The hot reference kernels split independent output planes
// with it; each call writes its own memory, so results do not depend on the
// schedule. A panic in f is re-raised in the caller's goroutine, where the
// executor's recover turns it into an error.
func parallelFor(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		once    sync.Once
		panicky any
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					once.Do(func() { panicky = r })
				}
			}()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		}()
	}
	wg.Wait()
	if panicky != nil {
		panic(panicky)
	}
}
