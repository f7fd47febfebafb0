package ops

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"

	"github.com/kiln-ml/kiln/ir"
)

// decodeImage runs ImageDecoder on encoded bytes through callKernel, which
// also holds the output to the type inferred from the constant stream.
func decodeImage(t *testing.T, data []byte, pixelFormat string) (*ir.Tensor, error) {
	t.Helper()
	in := ir.FromSlice(ir.Uint8, []int64{int64(len(data))}, data)
	outs, err := callKernel(t, "ImageDecoder", 20, []*ir.Tensor{in}, 1, ir.AttrS("pixel_format", pixelFormat))
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// decodeImageWithin runs the kernel alone, under limits.
func decodeImageWithin(data []byte, pixelFormat string, lim ir.Limits) (*ir.Tensor, error) {
	s, err := Lookup("", "ImageDecoder", 20)
	if err != nil {
		return nil, err
	}
	n := &ir.Node{OpType: "ImageDecoder", Attrs: []*ir.Attribute{ir.AttrS("pixel_format", pixelFormat)},
		Inputs: []*ir.Value{{Name: "data"}}, Outputs: []*ir.Value{{Name: "image"}}}
	c := NewKernelContext(s, n, 20, []*ir.Tensor{ir.FromSlice(ir.Uint8, []int64{int64(len(data))}, data)})
	c.Limits = lim
	if err := s.Run(c); err != nil {
		return nil, err
	}
	return c.Outputs[0], nil
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

// randomImages are images of every kind the lossless encoders take, with
// random pixels: opaque and translucent color, gray, 16-bit and paletted.
func randomImages(rng *rand.Rand, w, h int) map[string]image.Image {
	r := image.Rect(0, 0, w, h)
	opaque, translucent, gray := image.NewNRGBA(r), image.NewNRGBA(r), image.NewGray(r)
	deep := image.NewNRGBA64(r)
	palette := color.Palette{}
	for range 1 + rng.IntN(200) {
		palette = append(palette, color.RGBA{uint8(rng.Uint32()), uint8(rng.Uint32()), uint8(rng.Uint32()), 255})
	}
	paletted := image.NewPaletted(r, palette)
	for i := range w * h {
		x, y := i%w, i/w
		c := color.NRGBA{uint8(rng.Uint32()), uint8(rng.Uint32()), uint8(rng.Uint32()), 255}
		opaque.SetNRGBA(x, y, c)
		c.A = uint8(1 + rng.IntN(255))
		translucent.SetNRGBA(x, y, c)
		gray.SetGray(x, y, color.Gray{uint8(rng.Uint32())})
		deep.SetNRGBA64(x, y, color.NRGBA64{uint16(rng.Uint32()), uint16(rng.Uint32()), uint16(rng.Uint32()), 0xffff})
		paletted.SetColorIndex(x, y, uint8(rng.IntN(len(palette))))
	}
	return map[string]image.Image{"opaque": opaque, "translucent": translucent, "gray": gray, "16-bit": deep, "paletted": paletted}
}

// wantRGB is an image's pixels as RGB bytes: its color channels, not
// premultiplied, 16-bit ones by their high byte.
func wantRGB(img image.Image) []uint8 {
	b := img.Bounds()
	var out []uint8
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			switch c := img.At(x, y).(type) {
			case color.NRGBA:
				out = append(out, c.R, c.G, c.B)
			case color.NRGBA64:
				out = append(out, uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8))
			case color.Gray:
				out = append(out, c.Y, c.Y, c.Y)
			default:
				r, g, b, _ := c.RGBA() // opaque: palette entries
				out = append(out, uint8(r>>8), uint8(g>>8), uint8(b>>8))
			}
		}
	}
	return out
}

// encodePNM writes a binary (P5, P6) or ASCII (P2, P3) Netpbm image of 8-bit
// samples at maxval 255.
func encodePNM(kind byte, img image.Image) []byte {
	b := img.Bounds()
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "P%c\n# kiln\n%d %d\n255\n", kind, b.Dx(), b.Dy())
	rgb := wantRGB(img)
	for i := 0; i < len(rgb); i += 3 {
		samples := rgb[i : i+3]
		if kind == '2' || kind == '5' {
			samples = samples[:1]
		}
		for _, s := range samples {
			if kind <= '3' {
				fmt.Fprintf(&buf, "%d ", s)
			} else {
				buf.WriteByte(s)
			}
		}
	}
	return buf.Bytes()
}

// TestImageDecoderLosslessRoundTrip encodes random images with Go's PNG,
// GIF, BMP and TIFF encoders and a Netpbm writer and decodes them back:
// lossless, so the pixels must come back exactly, in each pixel format.
func TestImageDecoderLosslessRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 1))
	encoders := map[string]func(image.Image) ([]byte, error){
		"PNG": func(m image.Image) ([]byte, error) {
			var b bytes.Buffer
			err := png.Encode(&b, m)
			return b.Bytes(), err
		},
		"TIFF": func(m image.Image) ([]byte, error) {
			var b bytes.Buffer
			err := tiff.Encode(&b, m, nil)
			return b.Bytes(), err
		},
		"BMP": func(m image.Image) ([]byte, error) {
			var b bytes.Buffer
			err := bmp.Encode(&b, m)
			return b.Bytes(), err
		},
	}
	for _, size := range [][2]int{{1, 1}, {7, 5}, {32, 17}} {
		for kind, img := range randomImages(rng, size[0], size[1]) {
			streams := map[string][]byte{}
			for name, enc := range encoders {
				if name == "BMP" && (kind == "translucent" || kind == "16-bit") {
					continue // BMP keeps neither
				}
				b, err := enc(img)
				require.NoError(t, err)
				streams[name] = b
			}
			if p, ok := img.(*image.Paletted); ok {
				var b bytes.Buffer
				require.NoError(t, gif.Encode(&b, p, nil))
				streams["GIF"] = b.Bytes()
			}
			switch kind {
			case "gray":
				streams["PNM P5"], streams["PNM P2"] = encodePNM('5', img), encodePNM('2', img)
			case "opaque":
				streams["PNM P6"], streams["PNM P3"] = encodePNM('6', img), encodePNM('3', img)
			}
			want := wantRGB(img)
			for name, data := range streams {
				what := fmt.Sprintf("%s of a %dx%d %s image", name, size[0], size[1], kind)
				for _, pf := range []string{"RGB", "BGR", "Grayscale"} {
					out, err := decodeImage(t, data, pf)
					require.NoError(t, err, what)
					channels := int64(3)
					if pf == "Grayscale" {
						channels = 1
					}
					require.Equal(t, []int64{int64(size[1]), int64(size[0]), channels}, out.Dims, what)
					for i := range int(out.Len() / channels) {
						r, g, b := want[3*i], want[3*i+1], want[3*i+2]
						px := out.Raw[i*int(channels) : (i+1)*int(channels)]
						switch pf {
						case "RGB":
							require.Equal(t, []uint8{r, g, b}, px, "%s %s pixel %d", what, pf, i)
						case "BGR":
							require.Equal(t, []uint8{b, g, r}, px, "%s %s pixel %d", what, pf, i)
						default:
							require.Equal(t, luma(r, g, b), px[0], "%s %s pixel %d", what, pf, i)
						}
					}
				}
			}
		}
	}
}

// TestImageDecoderLumaMatchesPillow: Grayscale is Pillow's convert("L")
// (values from Pillow 9.4), which ONNX's reference and test data use;
// (222, 149, 10) is 154.98, where truncating formulas give 154.
func TestImageDecoderLumaMatchesPillow(t *testing.T) {
	cases := []struct{ r, g, b, l uint8 }{
		{0, 0, 0, 0}, {255, 255, 255, 255}, {255, 0, 0, 76}, {0, 255, 0, 150}, {0, 0, 255, 29}, {1, 1, 1, 1},
		{128, 64, 32, 79}, {207, 21, 45, 79}, {60, 46, 205, 68}, {222, 149, 10, 155}, {24, 85, 110, 70},
		{159, 122, 67, 127}, {40, 177, 188, 137}, {8, 29, 115, 33}, {100, 227, 132, 178}, {107, 110, 170, 116},
	}
	img := image.NewNRGBA(image.Rect(0, 0, len(cases), 1))
	for i, c := range cases {
		img.SetNRGBA(i, 0, color.NRGBA{c.r, c.g, c.b, 255})
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	out, err := decodeImage(t, b.Bytes(), "Grayscale")
	require.NoError(t, err)
	for i, c := range cases {
		assert.Equal(t, c.l, out.Raw[i], "L of (%d, %d, %d)", c.r, c.g, c.b)
	}
}

// TestImageDecoderPNMScalesAsPillow: samples of a maxval other than 255
// scale as Pillow scales them, ties to even (1/6·255 = 42.5 is 42, 3/6·255
// is 128); a bitmap's 1 is black. Want: Pillow 9.4's RGB.
func TestImageDecoderPNMScalesAsPillow(t *testing.T) {
	cases := []struct{ stream, rgb string }{
		{"P2 7 1 6 0 1 2 3 4 5 6\n", "0000002a2a2a555555808080aaaaaad4d4d4ffffff"},
		{"P3\n# comment\n3 2\n15\n0 1 2  3 4 5  6 7 8\n9 10 11 12 13 14 15 15 15\n", "00112233445566778899aabbccddeeffffff"},
		{"P6 2 1 100\n\x00\x32\x64\x01\x63\x21", "0080ff03fc54"},
		{"P1\n5 2\n10101\n0 1 0 1 0\n", "000000ffffff000000ffffff000000ffffff000000ffffff000000ffffff"},
		{"P4 5 2\n\xa8\x50", "000000ffffff000000ffffff000000ffffff000000ffffff000000ffffff"},
	}
	for _, c := range cases {
		out, err := decodeImage(t, []byte(c.stream), "RGB")
		if assert.NoError(t, err, "%q", c.stream) {
			assert.Equal(t, c.rgb, hex.EncodeToString(out.Raw), "%q", c.stream)
		}
	}
}

// TestImageDecoderGIFFrameOnScreen: a first frame smaller than the
// screen lies at its offset on palette index 0, as in Pillow 9.4.
func TestImageDecoderGIFFrameOnScreen(t *testing.T) {
	palette := color.Palette{color.RGBA{10, 20, 30, 255}, color.RGBA{200, 100, 50, 255}, color.RGBA{1, 2, 3, 255}}
	frame := image.NewPaletted(image.Rect(2, 1, 5, 3), palette)
	for i := range frame.Pix {
		frame.Pix[i] = 1
	}
	var b bytes.Buffer
	require.NoError(t, gif.EncodeAll(&b, &gif.GIF{Image: []*image.Paletted{frame}, Delay: []int{0},
		Config: image.Config{ColorModel: palette, Width: 6, Height: 4}, BackgroundIndex: 2}))
	out, err := decodeImage(t, b.Bytes(), "RGB")
	require.NoError(t, err)
	require.Equal(t, []int64{4, 6, 3}, out.Dims)
	for i := range 24 {
		want := []uint8{10, 20, 30}
		if x, y := i%6, i/6; x >= 2 && x < 5 && y >= 1 && y < 3 {
			want = []uint8{200, 100, 50}
		}
		assert.Equal(t, want, out.Raw[3*i:3*i+3], "pixel %d", i)
	}
}

// TestImageDecoderJPEGColorMatchesLibjpeg holds the JPEG chroma upsampling
// (the spec's triangle filter) and YCbCr conversion to libjpeg-turbo's:
// Y, Cb and Cr planes as libjpeg-turbo's IDCT gives them for JPEGs of odd
// and even sizes at 4:2:0, 4:2:2 and 4:4:0, and the RGB Pillow 9.4
// (libjpeg-turbo 2.1.5) decodes from them.
func TestImageDecoderJPEGColorMatchesLibjpeg(t *testing.T) {
	cases := []struct {
		w, h        int
		ratio       image.YCbCrSubsampleRatio
		planes, rgb string
	}{
		{6, 4, image.YCbCrSubsampleRatio440, "766db8b3716e716cbebf7f794a50b5cc9c9f494fb6cf9a94bfa744438895ccc16c71b4bc9195ab9c492f8c9b6e73b2c2", "8e54e68a51b2f4ae4edab44724967f00a193874fe68c4cbee5bb65d8c368568da13b8eb05c28cb732ab7b1c180c8d79cbe7de5c879f85a26d07525c29dca93bdddb4e064f6f150fe"},
		{6, 4, image.YCbCrSubsampleRatio422, "766db8b3716e716cbebf7f794a50b5cc9c9f494fb6cf9a94bb3a92b33d91c966b2c575b98db73991a3358f6ead9c79b3", "8858df8f539df6a675d5b25e398f6a0a9b8e8953cb8b5593e8b67bcac96d3ca37810a9975f26cb5a3aa5a7bcb3c9d0c0c57dd3de6ef8701dc36a31a6b9b1c6dac7dacc73e1dc5cf9"},
		{6, 4, image.YCbCrSubsampleRatio420, "766db8b3716e716cbebf7f794a50b5cc9c9f494fb6cf9a949f5292c275b592aa349881a6", "8f5ead8f5882eaa888c4b57e319175039e8e8d55b88c558fe7af9ed0be9a588f923692a96a26af6c3593c9abb5dbc6c5aa8bceac89ed6b21be6832a2c0aec4ddc6d8c379dcc967f2"},
		{7, 5, image.YCbCrSubsampleRatio440, "1e1ac9e0cec2821211c9e9c0c8993c356473676744524e706166622e817c7875706492c4ba5f429d9640abbc7a86c2cbe47671b5ac999f747a6c998887939c6d669c908e918fa8a4ddcebfaf99", "160b96001481ecc38febf072d8bfffddade9a98411050380000c7aedbf9bf7f199cdacffe3aeffbc8f7026379312339e8a554d876d60784bcc7f46d55d23ad4c4b87404797ae4d808e457d8a40c9853ad34708aea46e86986c83e434bbcc3db1b840ae9b3aaeb17dae"},
		{7, 5, image.YCbCrSubsampleRatio422, "1e1ac9e0cec2821211c9e9c0c8993c356473676744524e706166622e817c7875706492bd4da945bc559d3aab7bc5deb381cdf977c38a7c788496a6748c9ba7668d939662948e88a8d6b794", "130f8a131254cad0a0ede3aee6bceee6aadeb2754601067c090a4dd1cbabffe6bde0acd3f2b1cfcb8f491840881f366c685f7088638c7f4ac0833fec6117e02856ac364d937a67877c4d847b47cd743afe3b02f1b96871c5538ee033cde22bd3c83b9ba44170bb7e90"},
		{7, 5, image.YCbCrSubsampleRatio420, "1e1ac9e0cec2821211c9e9c0c8993c356473676744524e706166622e817c7875706492b8578e3ebf7ac8f56bb6957f72938f9c6d938b8da4cdb8a0", "0a1581121353d8c7abf9dcb0e4c3cedbb7b7a58030000979070a4fd7c5b7ffe2cbd5b1d7e0b6e4b88c8b2334a8282d7f725b6b8b66787b50ac7949d35a21bc4b479c543f8a92598e8c43888944b97f3cd74905bca07181a9628ec149abc63fb8b541ae9c3c9dbf71c7"},
	}
	for _, c := range cases {
		m := image.NewYCbCr(image.Rect(0, 0, c.w, c.h), c.ratio)
		planes := mustHex(t, c.planes)
		require.Len(t, planes, len(m.Y)+len(m.Cb)+len(m.Cr))
		copy(m.Y, planes)
		copy(m.Cb, planes[len(m.Y):])
		copy(m.Cr, planes[len(m.Y)+len(m.Cb):])
		assert.Equal(t, c.rgb, hex.EncodeToString(jpegRGB(m)), "%dx%d %v", c.w, c.h, c.ratio)
	}
}

// webpVectors are lossy WebP streams of 6×4 and 7×5 pixels and the RGB
// Pillow 9.4 (libwebp 1.2.4) decodes from them.
var webpVectors = []struct{ stream, rgb string }{
	{"52494646700000005745425056503820640000005002009d012a0600040002403825b00274ba007e1782d28b7abe0000fd03c98653fabb3998ed9264d801e62aff27d2a5f7bffda5c9bdfa6e3f80937dbe0f3d3ffd8dfd88f7add0fe6d937cfe3fbfaf996e9a0ff5dff9b36bfd4df45789ffa1bf90000000", "a250e9924299faaf80d6c269378a670f978e9245dc934da9e4ae8ee0cf9058827d4087a16f2bc158278cc1b5b7c5bbafb78dc9bf84e36021b65a339bacb5c7d0c9d7c771cedd61e4"},
	{"524946467800000057454250565038206c000000d001009d012a0700050002403825b00274010e67df3e0000fed2be6493ffa947fb0efb6b157ec4cf47e8dc07099acb140c9b347d7a9affeb7e0fdfd3fe9ff5ff8ff7f6c07b4b80bff621a9fec41c4377f277f52a9fd76ea3fdcffd26e15fceefe7fbbdfe953b7e7fcce80000", "250d8516064bc4c6a3dfd7a8ebc3dcebb6ccb48449100b7c120b4fdbd0bff6e1c8e0b8eae7b5f1be8b932949ab1a266a74546492607a7348a87447d15516ab3745854b3d7ba75c959132808d48bd8347dd5512c1b0787faf5b85c538a5ce34b8b339a49a3e9bb06ec4"},
}

// TestImageDecoderWebPMatchesLibwebp: lossy WebP (VP8 decodes exactly) at
// an even and an odd size, with libwebp's chroma upsampling and BT.601
// conversion.
func TestImageDecoderWebPMatchesLibwebp(t *testing.T) {
	for _, c := range webpVectors {
		out, err := decodeImage(t, mustHex(t, c.stream), "RGB")
		if assert.NoError(t, err) {
			assert.Equal(t, c.rgb, hex.EncodeToString(out.Raw), "%v", out.Dims)
		}
	}
}

// TestImageDecoderJPEG decodes what Go's JPEG encoder writes of a smooth
// image: lossy, so only near the source, but in place and in order.
func TestImageDecoderJPEG(t *testing.T) {
	w, h := 40, 24
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{uint8(6 * x), uint8(10 * y), uint8(255 - 3*x - 4*y), 255})
		}
	}
	var b bytes.Buffer
	require.NoError(t, jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}))
	want := wantRGB(img)
	for _, pf := range []string{"RGB", "BGR"} {
		out, err := decodeImage(t, b.Bytes(), pf)
		require.NoError(t, err)
		require.Equal(t, []int64{int64(h), int64(w), 3}, out.Dims)
		total := 0
		for i, v := range out.Raw {
			src := want[i]
			if pf == "BGR" {
				src = want[i-i%3+2-i%3]
			}
			total += max(int(v)-int(src), int(src)-int(v))
		}
		assert.Less(t, float64(total)/float64(len(want)), 2.0, "%s: mean absolute error", pf)
	}
}

// TestImageDecoderMalformed: bytes kiln cannot decode are an error naming
// the problem; a format kiln has no decoder for is UnsupportedError.
func TestImageDecoderMalformed(t *testing.T) {
	var pngStream bytes.Buffer
	require.NoError(t, png.Encode(&pngStream, image.NewGray(image.Rect(0, 0, 8, 8))))
	var jpegStream bytes.Buffer
	require.NoError(t, jpeg.Encode(&jpegStream, image.NewGray(image.Rect(0, 0, 8, 8)), nil))
	cases := []struct {
		name, stream, want string
	}{
		{"empty", "", "the encoded stream is empty"},
		{"text", "hello, world", "unrecognized image format: the stream starts 68 65 6c 6c 6f 2c 20 77"},
		{"PNG header only", pngStream.String()[:33], "PNG image: unexpected EOF"},
		{"PNG without its end", pngStream.String()[:pngStream.Len()-20], "PNG image:"},
		{"JPEG without its end", jpegStream.String()[:jpegStream.Len()/2], "JPEG image:"},
		{"no width", "P6\n", "PNM image: the stream ends before the width"},
		{"zero width", "P6\n0 3\n255\n", "PNM image: the image is 0×3 pixels"},
		{"maxval 0", "P5 2 2 0\n\x00\x00\x00\x00", "maxval 0 is outside 1..65535"},
		{"letters", "P6 x 2 255\n", `the width is "x", not a decimal number`},
		{"glued", "P6 2x2 255\n", `the width is followed by "x", not whitespace`},
		{"magic glued", "P61 2 255\n", `the magic number P6 is followed by "1"`},
		{"huge", "P5 99999999999 1 255\n", "width 9999999999... is too large"},
		{"short raster", "P6\n2 2\n255\n\x01\x02\x03", "truncated: 2×2 P6 needs 12 bytes of samples, the stream has 3"},
		{"short plain", "P3 1 1 255 1 2", "the stream ends before the sample 2 of 3"},
		{"bad bit", "P1 2 1 0 2", `P1 pixel 1 is "2", not 0 or 1`},
	}
	for _, c := range cases {
		_, err := decodeImage(t, []byte(c.stream), "RGB")
		if assert.Error(t, err, c.name) {
			assert.Contains(t, err.Error(), c.want, c.name)
			assert.False(t, errors.As(err, new(*UnsupportedError)), "%s: %v", c.name, err)
		}
	}

	for _, stream := range []string{"\x00\x00\x00\x0cjP  \r\n\x87\n\x00\x00\x00\x14ftypjp2 ", "\xff\x4f\xff\x51\x00\x2f"} {
		_, err := decodeImage(t, []byte(stream), "RGB")
		var ue *UnsupportedError
		if assert.True(t, errors.As(err, &ue), "%v", err) {
			assert.Equal(t, "JPEG 2000 images are not supported: no decoder", ue.Reason)
		}
	}

	_, err := decodeImage(t, []byte("P5 1 1 255\n\x00"), "RGBA")
	assert.ErrorContains(t, err, `pixel_format "RGBA" is not one of RGB, BGR, Grayscale`)

	_, err = callKernel(t, "ImageDecoder", 20, []*ir.Tensor{ir.NewTensor(ir.Uint8, 2, 3)}, 1)
	assert.ErrorContains(t, err, "input has rank 2, want a 1-D stream of bytes")

	// The size comes from the header and is checked before anything the
	// image needs is allocated.
	_, err = decodeImageWithin([]byte("P5 30000 30000 255\n"), "RGB", ir.Limits{MaxTensorBytes: 1 << 20})
	assert.ErrorIs(t, err, ir.ErrLimit)
	assert.ErrorContains(t, err, "the decoded PNM image")
}

// TestImageDecoderInfer: the output is [height, width, channels]; only a
// constant stream's header gives height and width.
func TestImageDecoderInfer(t *testing.T) {
	stream := ir.FromSlice(ir.Uint8, []int64{15}, []byte("P6 7 5 255\n...."))
	cases := []struct {
		in     ir.Type
		value  *ir.Tensor
		format string
		want   string
	}{
		{ir.TensorType(ir.Uint8, ir.S(1058)), nil, "RGB", "uint8[?,?,3]"},
		{ir.TensorType(ir.Uint8, ir.ShapeOf(ir.Sym("N"))), nil, "Grayscale", "uint8[?,?,1]"},
		{ir.TensorType(ir.Uint8, ir.Shape{}), nil, "BGR", "uint8[?,?,3]"},
		{stream.Type(), stream, "RGB", "uint8[5,7,3]"},
		{ir.TensorType(ir.Uint8, ir.S(3)), ir.FromSlice(ir.Uint8, []int64{3}, []byte("P6 ")), "RGB", "uint8[?,?,3]"},
	}
	for _, c := range cases {
		outs, err := callInfer("ImageDecoder", 20, []ir.Type{c.in}, []*ir.Tensor{c.value}, 1, ir.AttrS("pixel_format", c.format))
		if assert.NoError(t, err, "%s", c.in) {
			assert.Equal(t, c.want, outs[0].String(), "%s %s", c.in, c.format)
		}
	}
	_, err := callInfer("ImageDecoder", 20, []ir.Type{ir.TensorType(ir.Uint8, ir.S(4, 4))}, nil, 1)
	assert.ErrorContains(t, err, "input has rank 2")
	_, err = callInfer("ImageDecoder", 20, []ir.Type{ir.TensorType(ir.Float32, ir.S(4))}, nil, 1)
	assert.ErrorContains(t, err, "input is float, want uint8")
	_, err = callInfer("ImageDecoder", 20, []ir.Type{ir.TensorType(ir.Uint8, ir.S(4))}, nil, 1, ir.AttrS("pixel_format", "rgb"))
	assert.ErrorContains(t, err, `pixel_format "rgb" is not one of`)
}

// imageSeeds are valid streams of every format ImageDecoder reads.
func imageSeeds(t testing.TB) [][]byte {
	rng := rand.New(rand.NewPCG(3, 4))
	imgs := randomImages(rng, 9, 6)
	var seeds [][]byte
	encode := func(write func(w io.Writer) error) {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b.Bytes())
	}
	for _, kind := range []string{"opaque", "translucent", "gray", "16-bit", "paletted"} {
		encode(func(w io.Writer) error { return png.Encode(w, imgs[kind]) })
		encode(func(w io.Writer) error { return tiff.Encode(w, imgs[kind], &tiff.Options{Compression: tiff.Deflate}) })
	}
	encode(func(w io.Writer) error { return bmp.Encode(w, imgs["opaque"]) })
	encode(func(w io.Writer) error { return gif.Encode(w, imgs["paletted"], nil) })
	encode(func(w io.Writer) error { return jpeg.Encode(w, imgs["opaque"], nil) })
	encode(func(w io.Writer) error { return jpeg.Encode(w, imgs["gray"], nil) })
	add := func(b []byte, err error) {
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	for _, v := range webpVectors {
		add(hex.DecodeString(v.stream))
	}
	for _, kind := range []byte("2356") {
		src := imgs["opaque"]
		if kind == '2' || kind == '5' {
			src = imgs["gray"]
		}
		add(encodePNM(kind, src), nil)
	}
	add([]byte("P1 3 2 1 0 1\n0 1 0"), nil)
	add([]byte("P4 9 2\n\xff\x80\x00\x00"), nil)
	add([]byte("P5 2 1 65535\n\x12\x34\xff\xff"), nil)
	return seeds
}

// FuzzImageDecoder: no stream makes the kernel panic (a decoder's panic
// would come back as "decoder failed"), and a decoded image has the shape
// its header gave. The seeds are valid streams of each format, cut short
// at many lengths and with bytes overwritten.
func FuzzImageDecoder(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range imageSeeds(f) {
		f.Add(s)
		for _, n := range []int{1, 2, 5, 9, 16, 33, len(s) / 3, len(s) / 2, len(s) - 1} {
			if n > 0 && n < len(s) {
				f.Add(s[:n])
			}
		}
		for range 12 {
			m := bytes.Clone(s)
			for range 1 + rng.IntN(4) {
				m[rng.IntN(len(m))] = uint8(rng.Uint32())
			}
			f.Add(m)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, pf := range []string{"RGB", "Grayscale"} {
			out, err := decodeImageWithin(data, pf, ir.Limits{MaxTensorBytes: 1 << 22})
			if err != nil {
				assert.NotContains(t, err.Error(), "decoder failed")
				continue
			}
			channels := int64(3)
			if pf == "Grayscale" {
				channels = 1
			}
			require.Len(t, out.Dims, 3)
			assert.Equal(t, channels, out.Dims[2])
			assert.Equal(t, int(out.Len()), len(out.Raw))
		}
		if len(data) > 0 && data[0] == 'P' {
			pnmDecode(bytes.NewReader(data)) // unguarded: a panic fails here
		}
	})
}
