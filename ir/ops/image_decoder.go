package ops

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"

	"github.com/kiln-ml/kiln/ir"
)

// ImageDecoder: an encoded image (the bytes of a file, as a 1-D uint8
// tensor) to its pixels, uint8 [height, width, channels] with 3 channels
// (RGB or BGR) or 1 (Grayscale). The format is recognized by its leading
// bytes. ONNX's reference decodes with Pillow, which made the test data;
// where a format leaves the decoder a choice (JPEG's and WebP's chroma
// upsampling and YCbCr conversion) kiln does what Pillow's libjpeg-turbo
// and libwebp do, and a grayscale image is Pillow's convert("L") of the
// RGB one. Every image becomes RGB first: a gray, paletted or alpha image
// gives 3 channels, not Pillow's 1, 1 or 4 (the spec's output has the
// pixel format's channels). A stream kiln cannot decode is an error, as
// in the reference (the spec's "empty matrix" is no [H, W, C] tensor).

var imageDecoderOps = []*Schema{
	{Name: "ImageDecoder", Since: 20, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defString("pixel_format", "RGB")},
		Types: []ir.DType{ir.Uint8}, Infer: inferImageDecoder, Run: runImageDecoder},
}

func init() { register(imageDecoderOps) }

// pixelFormat is the attribute's channel order.
type pixelFormat string

const (
	pixelRGB       pixelFormat = "RGB"
	pixelBGR       pixelFormat = "BGR"
	pixelGrayscale pixelFormat = "Grayscale"
)

func (p pixelFormat) channels() int64 {
	if p == pixelGrayscale {
		return 1
	}
	return 3
}

func pixelFormatOf(a attrs) (pixelFormat, error) {
	switch p := pixelFormat(a.String("pixel_format")); p {
	case pixelRGB, pixelBGR, pixelGrayscale:
		return p, nil
	default:
		return "", fmt.Errorf("pixel_format %q is not one of RGB, BGR, Grayscale", string(p))
	}
}

// imageFormat is one encoding ImageDecoder recognizes: the prefixes that
// mark it ('?' matches any byte), how to read its size from the header and
// how to decode it. A format with no decode is recognized only to be
// refused by name. ycbcr, where set, converts the format's YCbCr images to
// RGB as its reference decoder does (Go's image/color formula is neither
// libjpeg's nor libwebp's).
type imageFormat struct {
	name     string
	prefixes []string
	config   func(io.Reader) (image.Config, error)
	decode   func(io.Reader) (image.Image, error)
	ycbcr    func(*image.YCbCr) []uint8
	// levels is how far apart two conforming decoders' values may be
	// (DecodedLevels).
	levels int
}

var imageFormats = []imageFormat{
	{name: "JPEG", prefixes: []string{"\xff\xd8"}, config: jpeg.DecodeConfig, decode: jpeg.Decode, ycbcr: jpegRGB, levels: 3},
	{name: "PNG", prefixes: []string{"\x89PNG\r\n\x1a\n"}, config: png.DecodeConfig, decode: png.Decode},
	{name: "GIF", prefixes: []string{"GIF87a", "GIF89a"}, config: gif.DecodeConfig, decode: gifDecode},
	{name: "BMP", prefixes: []string{"BM"}, config: bmp.DecodeConfig, decode: bmp.Decode},
	{name: "TIFF", prefixes: []string{"II*\x00", "MM\x00*"}, config: tiff.DecodeConfig, decode: tiff.Decode},
	{name: "WebP", prefixes: []string{"RIFF????WEBPVP8"}, config: webp.DecodeConfig, decode: webp.Decode, ycbcr: webpRGB},
	{name: "PNM", prefixes: []string{"P1", "P2", "P3", "P4", "P5", "P6"}, config: pnmConfig, decode: pnmDecode},
	// The JP2 signature box and a bare codestream's SOC and SIZ markers.
	{name: "JPEG 2000", prefixes: []string{"\x00\x00\x00\x0cjP  \r\n\x87\n", "\xff\x4f\xff\x51"}},
}

// DecodedLevels is how many levels apart two conforming decoders' values
// of an ImageDecoder node's output may be for the encoded image data: 0
// for the lossless formats. A baseline JPEG decoder's inverse DCT may be
// one level off the reference's per sample (ISO/IEC 10918-2's accuracy
// test), which the conversion from YCbCr to RGB (gains up to 1 + 1.772)
// grows to 3: Go's decoder and libjpeg-turbo's, which made ONNX's test
// data, differ so.
func DecodedLevels(data *ir.Tensor) int {
	if data == nil || data.DType != ir.Uint8 {
		return 0
	}
	f, err := imageFormatOf(data.Raw)
	if err != nil {
		return 0
	}
	return f.levels
}

func hasPrefix(b []byte, prefix string) bool {
	if len(b) < len(prefix) {
		return false
	}
	for i := range len(prefix) {
		if prefix[i] != '?' && b[i] != prefix[i] {
			return false
		}
	}
	return true
}

// imageFormatOf recognizes the stream's format, or says what it starts with.
func imageFormatOf(b []byte) (*imageFormat, error) {
	for i := range imageFormats {
		for _, p := range imageFormats[i].prefixes {
			if hasPrefix(b, p) {
				return &imageFormats[i], nil
			}
		}
	}
	if len(b) == 0 {
		return nil, errors.New("the encoded stream is empty")
	}
	return nil, fmt.Errorf("unrecognized image format: the stream starts % x", b[:min(len(b), 8)])
}

// imageHeader reads the format and size of an encoded image from its
// header, without decoding the pixels.
func imageHeader(b []byte) (*imageFormat, image.Config, error) {
	f, err := imageFormatOf(b)
	if err != nil {
		return nil, image.Config{}, err
	}
	if f.decode == nil {
		return f, image.Config{}, errNoDecoder{f.name}
	}
	var cfg image.Config
	err = guardDecoder(func() (err error) { cfg, err = f.config(bytes.NewReader(b)); return })
	if err != nil {
		return f, cfg, err
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return f, cfg, fmt.Errorf("the header gives %d×%d pixels", cfg.Width, cfg.Height)
	}
	return f, cfg, nil
}

type errNoDecoder struct{ format string }

func (e errNoDecoder) Error() string { return e.format + " images are not supported: no decoder" }

// guardDecoder runs a decoder step, turning a panic into an error: the
// decoders are third-party code reading untrusted bytes.
func guardDecoder(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder failed: %v", r)
		}
	}()
	return f()
}

// unsupportedFeature reports whether a decoder refused a valid image for a
// feature it lacks (lossless JPEG, a TIFF compression), not for bad bytes.
func unsupportedFeature(err error) bool {
	var je jpeg.UnsupportedError
	var pe png.UnsupportedError
	var te tiff.UnsupportedError
	return errors.As(err, &je) || errors.As(err, &pe) || errors.As(err, &te) || errors.Is(err, bmp.ErrUnsupported)
}

func checkEncodedStream(t ir.Type) error {
	if t.Elem != ir.Undefined && t.Elem != ir.Uint8 {
		return fmt.Errorf("input is %s, want uint8", t.Elem)
	}
	if t.Shape.Ranked && t.Shape.Rank() != 1 {
		return fmt.Errorf("input has rank %d, want a 1-D stream of bytes", t.Shape.Rank())
	}
	return nil
}

// inferImageDecoder: [height, width, channels], the size read from the
// header of a constant stream and unknown otherwise (or when the header
// does not parse: running the node then reports why).
func inferImageDecoder(c *InferContext) error {
	if err := checkEncodedStream(c.In(0)); err != nil {
		return c.Errorf("%v", err)
	}
	p, err := pixelFormatOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	h, w := ir.UnknownDim(), ir.UnknownDim()
	if t := c.Const(0); t != nil && t.DType == ir.Uint8 {
		if _, cfg, err := imageHeader(t.Raw); err == nil {
			h, w = ir.D(int64(cfg.Height)), ir.D(int64(cfg.Width))
		}
	}
	c.Set(0, ir.TensorType(ir.Uint8, ir.ShapeOf(h, w, ir.D(p.channels()))))
	return nil
}

func runImageDecoder(c *KernelContext) error {
	x := c.In(0)
	if err := checkEncodedStream(x.Type()); err != nil {
		return c.Errorf("%v", err)
	}
	p, err := pixelFormatOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	f, cfg, err := imageHeader(x.Raw)
	if err != nil {
		return imageError(c, f, err)
	}
	h, w := int64(cfg.Height), int64(cfg.Width)
	if _, err := c.Limits.CheckTensor(fmt.Sprintf("%s: the decoded %s image", c.Node, f.name), ir.Uint8, []int64{h, w, p.channels()}); err != nil {
		return err
	}
	var img image.Image
	err = guardDecoder(func() (err error) { img, err = f.decode(bytes.NewReader(x.Raw)); return })
	if err == nil && (img.Bounds().Dx() != cfg.Width || img.Bounds().Dy() != cfg.Height) {
		err = fmt.Errorf("decoded %v, but the header says %d×%d", img.Bounds().Size(), cfg.Width, cfg.Height)
	}
	if err != nil {
		return imageError(c, f, err)
	}
	rgb := rgbPixels(img, f)
	out := ir.NewTensor(ir.Uint8, h, w, p.channels())
	pix := out.Raw
	switch p {
	case pixelRGB:
		copy(pix, rgb)
	case pixelBGR:
		for i := 0; i < len(rgb); i += 3 {
			pix[i], pix[i+1], pix[i+2] = rgb[i+2], rgb[i+1], rgb[i]
		}
	case pixelGrayscale:
		for i := range pix {
			pix[i] = luma(rgb[3*i], rgb[3*i+1], rgb[3*i+2])
		}
	}
	c.Set(0, out)
	return nil
}

// imageError says why a stream did not decode: kiln lacking the format's
// decoder or a feature of it is an UnsupportedError; anything else is the
// stream's fault, named with its format where it has one.
func imageError(c *KernelContext, f *imageFormat, err error) error {
	var nd errNoDecoder
	switch {
	case errors.As(err, &nd) || unsupportedFeature(err):
		return &UnsupportedError{Domain: c.Node.Domain, Op: c.Node.OpType, Opset: c.Opset, Reason: err.Error()}
	case f != nil:
		return c.Errorf("%s image: %v", f.name, err)
	}
	return c.Errorf("%v", err)
}

// luma is Pillow's convert("L"): ITU-R 601-2 luma, L = 0.299 R + 0.587 G +
// 0.114 B, in 16-bit fixed point rounded to nearest (the weights sum to
// 65536, so a gray pixel keeps its value).
func luma(r, g, b uint8) uint8 {
	return uint8((uint32(r)*19595 + uint32(g)*38470 + uint32(b)*7471 + 1<<15) >> 16)
}

// rgbPixels returns the image's pixels as RGB, 3 bytes each in row-major
// order; alpha is dropped (the color channels are not premultiplied).
func rgbPixels(img image.Image, f *imageFormat) []uint8 {
	switch m := img.(type) {
	case *image.YCbCr:
		if f.ycbcr != nil {
			return f.ycbcr(m)
		}
	case *image.NYCbCrA:
		if f.ycbcr != nil {
			return f.ycbcr(&m.YCbCr)
		}
	}
	b := img.Bounds()
	out := make([]uint8, 0, 3*b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			out = append(out, c.R, c.G, c.B)
		}
	}
	return out
}

// gifDecode returns the first frame on the logical screen, as Pillow does:
// the frame at its offset, the rest of the screen palette index 0.
func gifDecode(r io.Reader) (image.Image, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	cfg, err := gif.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	img, err := gif.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	frame, ok := img.(*image.Paletted)
	screen := image.Rect(0, 0, cfg.Width, cfg.Height)
	if !ok || frame.Rect == screen {
		return img, nil
	}
	canvas := image.NewPaletted(screen, frame.Palette)
	in := frame.Rect.Intersect(screen)
	for y := in.Min.Y; y < in.Max.Y; y++ {
		copy(canvas.Pix[canvas.PixOffset(in.Min.X, y):canvas.PixOffset(in.Max.X, y)], frame.Pix[frame.PixOffset(in.Min.X, y):])
	}
	return canvas, nil
}

// --- JPEG and WebP color ---------------------------------------------------------

// chromaPlane is one subsampled chroma plane, w×h samples densely stored.
type chromaPlane struct {
	pix  []uint8
	w, h int
}

func (p chromaPlane) at(x, y int) int32 {
	return int32(p.pix[min(max(y, 0), p.h-1)*p.w+min(max(x, 0), p.w-1)])
}

// chromaOf copies the Cb and Cr planes of m and returns the subsampling
// factors (1, 2 or 4 across, 1 or 2 down).
func chromaOf(m *image.YCbCr) (cb, cr chromaPlane, sx, sy int) {
	sx, sy = 1, 1
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio422:
		sx = 2
	case image.YCbCrSubsampleRatio420:
		sx, sy = 2, 2
	case image.YCbCrSubsampleRatio440:
		sy = 2
	case image.YCbCrSubsampleRatio411:
		sx = 4
	case image.YCbCrSubsampleRatio410:
		sx, sy = 4, 2
	}
	r := m.Rect
	w, h := (r.Dx()+sx-1)/sx, (r.Dy()+sy-1)/sy
	cb, cr = chromaPlane{make([]uint8, w*h), w, h}, chromaPlane{make([]uint8, w*h), w, h}
	for y := range h {
		for x := range w {
			o := m.COffset(r.Min.X+x*sx, r.Min.Y+y*sy)
			cb.pix[y*w+x], cr.pix[y*w+x] = m.Cb[o], m.Cr[o]
		}
	}
	return cb, cr, sx, sy
}

// ycbcrToRGB upsamples m's chroma with up and converts each pixel with
// toRGB.
func ycbcrToRGB(m *image.YCbCr, up func(p chromaPlane, sx, sy, w, h int) []uint8, toRGB func(y, cb, cr int32) (r, g, b uint8)) []uint8 {
	r := m.Rect
	w, h := r.Dx(), r.Dy()
	cbPlane, crPlane, sx, sy := chromaOf(m)
	cb, cr := up(cbPlane, sx, sy, w, h), up(crPlane, sx, sy, w, h)
	out := make([]uint8, 0, 3*w*h)
	for y := range h {
		for x := range w {
			i := y*w + x
			R, G, B := toRGB(int32(m.Y[m.YOffset(r.Min.X+x, r.Min.Y+y)]), int32(cb[i]), int32(cr[i]))
			out = append(out, R, G, B)
		}
	}
	return out
}

func jpegRGB(m *image.YCbCr) []uint8 { return ycbcrToRGB(m, jpegUpsample, jpegYCbCrToRGB) }

// jpegUpsample brings a chroma plane to w×h as libjpeg-turbo does by
// default: halved chroma by the triangle filter ("fancy upsampling", the
// method the ONNX spec prescribes), 3/4 of the nearer sample and 1/4 of
// the next along each halved axis, edges replicated, with its rounding
// biases alternating between the two output pixels of a sample; chroma
// reduced 4× across (4:1:1, 4:1:0) and planes only 1 or 2 samples wide
// are replicated, as libjpeg-turbo does there.
func jpegUpsample(p chromaPlane, sx, sy, w, h int) []uint8 {
	out := make([]uint8, w*h)
	if sx == 1 && sy == 1 {
		copy(out, p.pix)
		return out
	}
	fancyAcross := sx == 2 && p.w > 2
	if sx == 4 || sx == 2 && !fancyAcross {
		for y := range h {
			for x := range w {
				out[y*w+x] = uint8(p.at(x/sx, y/sy))
			}
		}
		return out
	}
	for y := range h {
		// sum(cx) is the column's vertical filter, scaled by 4 where
		// chroma is halved down.
		near, far := y/sy, y/sy
		if sy == 2 {
			far = near + 1
			if y%2 == 0 {
				far = near - 1
			}
		}
		sum := func(cx int) int32 {
			if sy == 2 {
				return 3*p.at(cx, near) + p.at(cx, far)
			}
			return p.at(cx, near)
		}
		for x := range w {
			var v int32
			switch cx := x / sx; {
			case !fancyAcross: // vertical only (4:4:0)
				v = (sum(cx) + 1 + int32(y%2)) >> 2
			case sy == 1 && x%2 == 0: // 4:2:2
				v = (3*sum(cx) + sum(cx-1) + 1) >> 2
			case sy == 1:
				v = (3*sum(cx) + sum(cx+1) + 2) >> 2
			case x%2 == 0: // 4:2:0
				v = (3*sum(cx) + sum(cx-1) + 8) >> 4
			default:
				v = (3*sum(cx) + sum(cx+1) + 7) >> 4
			}
			out[y*w+x] = uint8(v)
		}
	}
	return out
}

// jpegYCbCrToRGB is JFIF's full-range conversion in libjpeg's 16-bit fixed
// point (its jdcolor.c tables): each chroma term rounded to nearest, then
// added to Y and clamped.
func jpegYCbCrToRGB(y, cb, cr int32) (r, g, b uint8) {
	const half = 1 << 15
	cb, cr = cb-128, cr-128
	return clampUint8(y + (91881*cr+half)>>16), // 1.40200
		clampUint8(y + (-22554*cb-46802*cr+half)>>16), // 0.34414, 0.71414
		clampUint8(y + (116130*cb+half)>>16) // 1.77200
}

func clampUint8(v int32) uint8 { return uint8(min(max(v, 0), 255)) }

func webpRGB(m *image.YCbCr) []uint8 { return ycbcrToRGB(m, webpUpsample, webpYUVToRGB) }

// webpUpsample doubles a 4:2:0 chroma plane (the only subsampling VP8
// has) as libwebp's default "fancy" upsampler does: each output pixel is
// (9·nearest + 3·each side neighbour + 1·diagonal)/16, computed in its two
// steps of rounding; the first row uses chroma row 0 alone, and edge
// columns and the last row of an even height use the nearer samples
// (3:1) only.
func webpUpsample(p chromaPlane, sx, sy, w, h int) []uint8 {
	if sx != 2 || sy != 2 {
		return jpegUpsample(p, sx, sy, w, h) // not VP8's; never decoded
	}
	out := make([]uint8, w*h)
	for y := range h {
		near, far := y/2, y/2-1 // even rows: their chroma row and the one above
		switch {
		case y == 0:
			near, far = 0, 0
		case y%2 == 1:
			near, far = (y-1)/2, min((y+1)/2, p.h-1)
		}
		for x := range w {
			k := (x + 1) / 2 // x is 2k-1 or 2k: between chroma columns k-1 and k
			var v int32
			if x == 0 || k >= p.w {
				c := min(k, p.w) - x%2 // the edge column
				v = (3*p.at(c, near) + p.at(c, far) + 2) >> 2
			} else {
				a, o := k-1, k // a: the nearer column, o: the other
				if x%2 == 0 {
					a, o = k, k-1
				}
				nearest, side, below, diag := p.at(a, near), p.at(o, near), p.at(a, far), p.at(o, far)
				sum := nearest + side + below + diag + 8
				v = ((sum+2*(side+below))>>3 + nearest) >> 1
			}
			out[y*w+x] = uint8(v)
		}
	}
	return out
}

// webpYUVToRGB is libwebp's BT.601 limited-range conversion (VP8's Y in
// 16..235) in its fixed point: products in 8.8, sums in 6 fractional bits
// dropped at the end, then clamped.
func webpYUVToRGB(y, u, v int32) (r, g, b uint8) {
	mult := func(x, k int32) int32 { return x * k >> 8 }
	clip := func(x int32) uint8 { return clampUint8(x >> 6) }
	yy := mult(y, 19077)
	return clip(yy + mult(v, 26149) - 14234),
		clip(yy - mult(u, 6419) - mult(v, 13320) + 8708),
		clip(yy + mult(u, 33050) - 17685)
}

// --- PNM -------------------------------------------------------------------------

// pnmHeader is a Netpbm header: P1/P4 bitmaps, P2/P5 graymaps, P3/P6
// pixmaps (the first of each pair ASCII, the second binary).
type pnmHeader struct {
	kind          byte // '1'..'6'
	width, height int
	maxval        int // 1 for bitmaps
	raster        int // offset of the first sample
}

func (h pnmHeader) plain() bool { return h.kind <= '3' }

func (h pnmHeader) bands() int {
	if h.kind == '3' || h.kind == '6' {
		return 3
	}
	return 1
}

func isPNMSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// pnmToken reads the decimal number at b[i:], after whitespace and
// comments, and returns it and the offset after it.
func pnmToken(b []byte, i int, what string) (int, int, error) {
	for i < len(b) && (isPNMSpace(b[i]) || b[i] == '#') {
		if b[i] == '#' {
			for i < len(b) && b[i] != '\n' && b[i] != '\r' {
				i++
			}
			continue
		}
		i++
	}
	start, v := i, 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if v = 10*v + int(b[i]-'0'); v > 1<<30 {
			return 0, i, fmt.Errorf("%s %s... is too large", what, b[start:i+1])
		}
	}
	switch {
	case i == start && i == len(b):
		return 0, i, fmt.Errorf("the stream ends before the %s", what)
	case i == start:
		return 0, i, fmt.Errorf("the %s is %q, not a decimal number", what, b[i:i+1])
	case i < len(b) && !isPNMSpace(b[i]) && b[i] != '#':
		return 0, i, fmt.Errorf("the %s is followed by %q, not whitespace", what, b[i:i+1])
	}
	return v, i, nil
}

func pnmHeaderOf(b []byte) (pnmHeader, error) {
	if len(b) < 2 || b[0] != 'P' || b[1] < '1' || b[1] > '6' {
		return pnmHeader{}, errors.New("not a P1-P6 header")
	}
	h := pnmHeader{kind: b[1], maxval: 1}
	var err error
	i := 2
	if i < len(b) && !isPNMSpace(b[i]) && b[i] != '#' {
		return h, fmt.Errorf("the magic number P%c is followed by %q, not whitespace", h.kind, b[i:i+1])
	}
	if h.width, i, err = pnmToken(b, i, "width"); err != nil {
		return h, err
	}
	if h.height, i, err = pnmToken(b, i, "height"); err != nil {
		return h, err
	}
	if h.kind != '1' && h.kind != '4' {
		if h.maxval, i, err = pnmToken(b, i, "maxval"); err != nil {
			return h, err
		}
		if h.maxval < 1 || h.maxval > 65535 {
			return h, fmt.Errorf("maxval %d is outside 1..65535", h.maxval)
		}
	}
	if h.width < 1 || h.height < 1 {
		return h, fmt.Errorf("the image is %d×%d pixels", h.width, h.height)
	}
	if !h.plain() {
		// One whitespace byte separates the header from the raster.
		if i >= len(b) || !isPNMSpace(b[i]) {
			return h, errors.New("the header does not end in whitespace before the raster")
		}
		i++
	}
	h.raster = i
	return h, nil
}

func pnmConfig(r io.Reader) (image.Config, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return image.Config{}, err
	}
	h, err := pnmHeaderOf(b)
	return image.Config{Width: h.width, Height: h.height}, err
}

// pnmDecode reads a PNM image as *image.Gray or an opaque *image.RGBA. A
// bitmap's 1 is black. Samples scale to 0..255 as Pillow scales them: the
// nearest, ties to even, of v/maxval·255 in float64; a sample over maxval
// is clamped.
func pnmDecode(r io.Reader) (image.Image, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	h, err := pnmHeaderOf(b)
	if err != nil {
		return nil, err
	}
	n := h.width * h.height * h.bands() // samples
	data := b[h.raster:]
	// Bound the allocation by the stream before making it: every sample
	// takes at least one byte (or bit) of it.
	var rowBytes, need int
	switch {
	case h.kind == '4':
		rowBytes = (h.width + 7) / 8
		need = rowBytes * h.height
	case h.plain():
		need = n
	case h.maxval > 255:
		need = 2 * n
	default:
		need = n
	}
	if len(data) < need {
		return nil, fmt.Errorf("truncated: %d×%d P%c needs %d bytes of samples, the stream has %d", h.width, h.height, h.kind, need, len(data))
	}
	samples := make([]uint8, n)
	scale := func(v int) uint8 {
		if h.maxval == 255 {
			return uint8(min(v, 255))
		}
		return uint8(min(math.RoundToEven(float64(v)/float64(h.maxval)*255), 255))
	}
	switch {
	case h.kind == '4':
		for y := range h.height {
			for x := range h.width {
				bit := data[y*rowBytes+x/8] >> (7 - x%8) & 1
				samples[y*h.width+x] = 255 * (1 - bit)
			}
		}
	case h.kind == '1': // one '0' or '1' per pixel; whitespace between is optional
		i := 0
		for k := range samples {
			for i < len(data) && (isPNMSpace(data[i]) || data[i] == '#') {
				if data[i] == '#' {
					for i < len(data) && data[i] != '\n' && data[i] != '\r' {
						i++
					}
					continue
				}
				i++
			}
			if i == len(data) {
				return nil, fmt.Errorf("truncated: P1 pixel %d of %d is missing", k, n)
			}
			if data[i] != '0' && data[i] != '1' {
				return nil, fmt.Errorf("P1 pixel %d is %q, not 0 or 1", k, data[i:i+1])
			}
			samples[k] = 255 * ('1' - data[i])
			i++
		}
	case h.plain():
		i := 0
		for k := range samples {
			v, next, err := pnmToken(data, i, fmt.Sprintf("sample %d of %d", k, n))
			if err != nil {
				return nil, err
			}
			samples[k], i = scale(v), next
		}
	case h.maxval > 255: // big-endian 16-bit samples
		for k := range samples {
			samples[k] = scale(int(data[2*k])<<8 | int(data[2*k+1]))
		}
	default:
		for k := range samples {
			samples[k] = scale(int(data[k]))
		}
	}
	rect := image.Rect(0, 0, h.width, h.height)
	if h.bands() == 1 {
		return &image.Gray{Pix: samples, Stride: h.width, Rect: rect}, nil
	}
	m := image.NewRGBA(rect)
	for k := range h.width * h.height {
		copy(m.Pix[4*k:4*k+3], samples[3*k:3*k+3])
		m.Pix[4*k+3] = 255
	}
	return m, nil
}
