package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Data symbol (a dim the run computes, NonZero's count) comes from no
// input: Resolve gives its maximum, which the outputs are allocated at,
// and refuses an input that names it; an output's dims then follow the
// value the run wrote.
func TestResolveDataSymbol(t *testing.T) {
	syms := []Symbol{{Name: "N", Min: 1, Opt: 1, Max: 8}, {Name: "count_y", Min: 0, Opt: 40, Max: 40, Data: true}}
	in := Binding{Name: "x", DType: "float", Shape: []int64{8, 5}, Dims: []string{"N", ""}}
	out := Binding{Name: "y", DType: "int64", Shape: []int64{2, 40}, Dims: []string{"", "count_y"}}
	vals, err := Resolve(syms, []Binding{in}, [][]int64{{3, 5}})
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 40}, vals)
	dims, err := out.DimsAt(syms, []int64{3, 0})
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 0}, dims, "none found")

	named := Binding{Name: "x", DType: "float", Shape: []int64{8, 40}, Dims: []string{"N", "count_y"}}
	_, err = Resolve(syms, []Binding{named}, [][]int64{{3, 7}})
	assert.ErrorContains(t, err, "computes from the data")
}
