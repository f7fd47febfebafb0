package conformance

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// An ImageDecoder's output of a JPEG may be up to 3 levels off the
// expected data (two conforming decoders' inverse DCTs differ), and no
// more; a PNG's must be exact.
func TestDecodedLevels(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	img.Set(0, 0, color.RGBA{1, 2, 3, 255})
	for _, c := range []struct {
		name   string
		encode func(*bytes.Buffer) error
		levels int
	}{
		{"jpeg", func(b *bytes.Buffer) error { return jpeg.Encode(b, img, nil) }, 3},
		{"png", func(b *bytes.Buffer) error { return png.Encode(b, img) }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, c.encode(&buf))
			g := ir.NewGraph("decode")
			data := g.AddInput("data", ir.TensorType(ir.Uint8, ir.S(int64(buf.Len()))))
			y := g.Apply("ImageDecoder", []*ir.Value{data})
			y.Name = "y"
			g.SetOutputs(y)
			m := ir.NewModel(g, 20)
			inputs := map[string]*ir.Tensor{"data": ir.FromSlice(ir.Uint8, []int64{int64(buf.Len())}, buf.Bytes())}
			got := ir.NewTensor(ir.Uint8, 8, 8, 3)
			for i := range got.Raw {
				got.Raw[i] = uint8(100 + i%50)
			}
			for _, off := range []int{0, 1, c.levels, c.levels + 1} {
				want := got.Clone()
				want.Raw[5] += uint8(off)
				_, ok := compareOutputs(m, inputs, []*ir.Tensor{want}, map[string]*ir.Tensor{"y": got}, DefaultTolerance)
				assert.Equal(t, off <= c.levels, ok, "%d levels apart", off)
			}
		})
	}
}
