package cpu

import (
	"errors"
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// ErrNoMemory is what every *MemoryError matches with errors.Is.
var ErrNoMemory = errors.New("not enough memory")

// MemoryError says that a buffer does not fit the memory the process can
// get. Its callers say what the buffer is and what to change.
type MemoryError struct {
	Bytes     int64  // the buffer's size
	Available int64  // what could be had (math.MaxInt64: no bound known)
	Bound     string // what bounds Available
	Err       error  // the mapping's error, when the kernel refused it
}

func (e *MemoryError) Error() string {
	s := fmt.Sprintf("%s do not fit", ir.FormatBytes(e.Bytes))
	if e.Available < math.MaxInt64 {
		s += fmt.Sprintf(" the %s this process can get (%s)", ir.FormatBytes(e.Available), e.Bound)
	}
	if e.Err != nil {
		s += fmt.Sprintf(": mapping them failed: %v", e.Err)
	}
	return s
}

// Is makes errors.Is(err, ErrNoMemory) true for every MemoryError.
func (e *MemoryError) Is(target error) bool { return target == ErrNoMemory }
