package cpu

import (
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/kiln-ml/kiln/cpuabi"
)

// TimeRuns loads a tuner's trial code and returns its fastest run (see
// cpuabi.Trial); the outputs are left in t.IO. It is codegen/cpu's
// Runner: the compiler measures candidate kernels through it without
// loading code itself.
func TimeRuns(t *cpuabi.Trial) (time.Duration, error) {
	if t.Runs < 1 {
		return 0, fmt.Errorf("cpu: a trial of %d runs times nothing", t.Runs)
	}
	lib, err := Open(t.Code)
	if err != nil {
		return 0, err
	}
	defer lib.Close()
	live, err := ExpandWeights(lib, t.Weights, t.Derived)
	if err != nil {
		return 0, err
	}
	defer live.Free()
	copies := make([]*Buffer, max(1, min(64, t.Footprint/max(1, int64(len(live.Bytes))))))
	for i := range copies {
		if copies[i], err = NewBuffer(int64(len(live.Bytes)) + 64); err != nil {
			return 0, err
		}
		copy(copies[i].Bytes, live.Bytes)
		defer copies[i].Free()
	}
	arena, err := NewBuffer(t.ArenaBytes + 64)
	if err != nil {
		return 0, err
	}
	defer arena.Free()
	io := make([]unsafe.Pointer, len(t.IO))
	for i, b := range t.IO {
		if len(b) > 0 {
			io[i] = unsafe.Pointer(&b[0])
		}
	}
	best := time.Duration(math.MaxInt64)
	for i := range t.Warmups + t.Runs {
		w := copies[i%len(copies)].Bytes
		start := time.Now()
		lib.Run(1, unsafe.Pointer(&w[0]), unsafe.Pointer(&arena.Bytes[0]), io)
		if d := time.Since(start); i >= t.Warmups {
			best = min(best, d)
		}
	}
	return best, nil
}
