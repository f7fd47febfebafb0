package dataset

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/readfile/fifotest"
	"github.com/kiln-ml/kiln/ir"
)

// Issue 32: a named pipe as an input file (--input, --data, --calib,
// --labels, a test_data_set's input_0.pb or a file in a folder of them)
// hung the reader forever; each is refused at once, by name.
func TestNamedPipesRefused(t *testing.T) {
	dir := t.TempDir()
	in := []Input{{"x", ir.Float32, []int64{1, 3}}}
	for _, name := range []string{"x.npy", "x.pb"} {
		pipe := filepath.Join(dir, name)
		fifotest.Make(t, pipe)
		fifotest.Returns(t, pipe, func() error { _, err := ReadTensor(pipe, ir.Limits{}); return err })
		fifotest.Returns(t, pipe, func() error { _, err := Read([]string{pipe}, in, ir.Limits{}); return err })
		fifotest.Returns(t, pipe, func() error { _, err := Read([]string{"x=" + pipe}, in, ir.Limits{}); return err })
		fifotest.Returns(t, pipe, func() error { _, err := ReadLabels(pipe, ir.Limits{}); return err })
	}

	folder := filepath.Join(dir, "samples")
	writeNPY(t, filepath.Join(folder, "part1.npy"), randomTensor(7, 2, 3))
	pipe := filepath.Join(folder, "part2.npy")
	fifotest.Make(t, pipe)
	fifotest.Returns(t, pipe, func() error { _, err := Read([]string{folder}, in, ir.Limits{}); return err })

	set := filepath.Join(dir, "test_data_set_0")
	require.NoError(t, os.Mkdir(set, 0o755))
	pipe = filepath.Join(set, "input_0.pb")
	fifotest.Make(t, pipe)
	fifotest.Returns(t, pipe, func() error { _, err := Read([]string{set}, in, ir.Limits{}); return err })
}
