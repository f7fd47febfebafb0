//go:build !linux

package cpu

import (
	"errors"
	"os"

	"github.com/kiln-ml/kiln/cpuabi"
)

// MapLive maps weights on Linux only: here it returns ErrNoMap, and the
// loader copies the weights.
func MapLive(*os.File, int64, *cpuabi.ABI) (*Live, error) { return nil, ErrNoMap }

// ErrNoMap says MapLive could not map the weights.
var ErrNoMap = errors.New("the weights cannot be mapped from the file")
