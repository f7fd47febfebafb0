package serve

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// TestJSONDataRoundTrip: random tensors of each datatype written as JSON
// data and read back are the same bytes, flat or nested; NaN and ±Inf
// travel as strings.
func TestJSONDataRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for d := range datatypeOf {
		x := ir.NewTensor(d, 2, 3)
		for i := range x.Raw {
			x.Raw[i] = byte(r.IntN(256))
		}
		switch d {
		case ir.Bool:
			for i := range x.Raw {
				x.Raw[i] &= 1
			}
		case ir.Float32, ir.Float64, ir.Float16, ir.BFloat16:
			for i := range int(x.Len()) {
				putFloat(x, i, r.NormFloat64()*100)
			}
			putFloat(x, 1, math.NaN())
			putFloat(x, 2, math.Inf(-1))
		}
		data := appendJSONData(nil, x)
		got, err := decodeJSONData(data, d, x.Dims)
		require.NoError(t, err, "%s: %s", Datatype(d), data)
		assert.Equal(t, x.Raw, got.Raw, "%s: %s", Datatype(d), data)

		var flat []json.RawMessage
		require.NoError(t, json.Unmarshal(data, &flat))
		nested, _ := json.Marshal([][]json.RawMessage{flat[:3], flat[3:]})
		got, err = decodeJSONData(nested, d, x.Dims)
		require.NoError(t, err, "%s nested: %s", Datatype(d), nested)
		assert.Equal(t, x.Raw, got.Raw, "%s nested", Datatype(d))
	}
}

func TestJSONDataErrors(t *testing.T) {
	for _, c := range []struct {
		data  string
		d     ir.DType
		shape []int64
		want  string
	}{
		{`[1, 2, 300]`, ir.Uint8, []int64{3}, "element 2: 300 is not an integer in UINT8's range"},
		{`[1, -1]`, ir.Uint32, []int64{2}, "element 1: -1 is not an integer in UINT32's range"},
		{`[1.5]`, ir.Int64, []int64{1}, "element 0: 1.5 is not an integer in INT64's range"},
		{`[1, true]`, ir.Float32, []int64{2}, "element 1: true is not a number"},
		{`[1, 0]`, ir.Bool, []int64{2}, "element 0: 1 is not true or false (datatype BOOL)"},
		{`["NaN"]`, ir.Int32, []int64{1}, `element 0: "NaN" is not a number`},
		{`["x"]`, ir.Float32, []int64{1}, `"x" is not a number (strings stand only for NaN, Inf, -Inf)`},
		{`[{"a": 1}]`, ir.Float32, []int64{1}, "data holds an object"},
		{`7`, ir.Float32, []int64{1}, "data must be an array of numbers"},
		{`[1, 2]`, ir.Float32, []int64{3}, "data has 2 elements, shape [3] holds 3"},
		{`[1, 2]`, ir.Float32, []int64{-1}, "shape [-1] has a negative dim"},
	} {
		_, err := decodeJSONData(json.RawMessage(c.data), c.d, c.shape)
		if assert.Error(t, err, c.data) {
			assert.Contains(t, err.Error(), c.want, c.data)
		}
	}
}
