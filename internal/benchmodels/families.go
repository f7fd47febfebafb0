package main

import "github.com/kiln-ml/kiln/ir"

// family is one generated architecture: build makes it for a size×size
// RGB input, returning the builder and the logits.
type family struct {
	name  string
	size  int64 // the benchmark's input height and width
	build func(seed, size int64) (*net, *ir.Value)
}

// families are the generated models, in the benchmark table's order. The
// README says what kernel path each one is there for.
var families = []family{
	{"resnet50", 224, resnet50},
	{"efficientnet_b0", 224, efficientnetB0},
	{"googlenet", 224, googlenet},
	{"mobilenet_v3_small", 224, mobilenetV3Small},
	{"convnext_tiny_s12", 112, convnextTinyStages12},
	{"vgg16_112", 112, vgg16},
}

func familyByName(name string) (family, bool) {
	for _, f := range families {
		if f.name == name {
			return f, true
		}
	}
	return family{}, false
}

// resnet50 is torchvision's ResNet-50 with its batch norms kept as
// BatchNormalization nodes (an export with constant folding off, or from
// another framework), so kiln's folding pass has work to do.
func resnet50(seed, size int64) (*net, *ir.Value) {
	b, x := newNet("resnet50", seed, false, 1, 3, size, size)
	x = b.maxPool(b.relu(b.convBN(x, 64, 7, 2, 1)), 3, 2, 1, false)
	for stage, blocks := range []int{3, 4, 6, 3} {
		width := int64(64) << stage
		for i := 0; i < blocks; i++ {
			stride := int64(1)
			if i == 0 && stage > 0 {
				stride = 2
			}
			y := b.relu(b.convBN(x, width, 1, 1, 1))
			y = b.relu(b.convBN(y, width, 3, stride, 1))
			y = b.convBN(y, 4*width, 1, 1, 1)
			shortcut := x
			if i == 0 {
				shortcut = b.convBN(x, 4*width, 1, stride, 1)
			}
			x = b.relu(b.add(y, shortcut))
		}
	}
	return b, b.classifier(b.flatten(b.globalAvgPool(x)), 1000)
}

// efficientnetB0 is torchvision's EfficientNet-B0: MBConv blocks with
// SiLU (x·Sigmoid(x)) and squeeze-excitation, batch norms folded.
func efficientnetB0(seed, size int64) (*net, *ir.Value) {
	b, x := newNet("efficientnet_b0", seed, true, 1, 3, size, size)
	x = b.silu(b.convBN(x, 32, 3, 2, 1))
	for _, s := range []struct{ expand, k, stride, out, layers int64 }{
		{1, 3, 1, 16, 1}, {6, 3, 2, 24, 2}, {6, 5, 2, 40, 2}, {6, 3, 2, 80, 3},
		{6, 5, 1, 112, 3}, {6, 5, 2, 192, 4}, {6, 3, 1, 320, 1},
	} {
		for i := int64(0); i < s.layers; i++ {
			stride := s.stride
			if i > 0 {
				stride = 1
			}
			in := b.dims(x)[1]
			y := x
			if s.expand != 1 {
				y = b.silu(b.convBN(y, in*s.expand, 1, 1, 1))
			}
			c := in * s.expand
			y = b.silu(b.convBN(y, c, s.k, stride, c))
			y = b.squeezeExcite(y, max(1, in/4), b.silu, b.sigmoid)
			y = b.convBN(y, s.out, 1, 1, 1)
			if stride == 1 && in == s.out {
				y = b.add(y, x)
			}
			x = y
		}
	}
	x = b.silu(b.convBN(x, 1280, 1, 1, 1))
	return b, b.classifier(b.flatten(b.globalAvgPool(x)), 1000)
}

// squeezeExcite is torchvision's SqueezeExcitation: global average pool,
// 1×1 conv to squeeze channels, act, 1×1 conv back, gate, and the scale.
func (b *net) squeezeExcite(x *ir.Value, squeeze int64, act, gate func(*ir.Value) *ir.Value) *ir.Value {
	c := b.dims(x)[1]
	s := act(b.conv(b.globalAvgPool(x), squeeze, 1, 1, 1, true))
	s = gate(b.conv(s, c, 1, 1, 1, true))
	return b.mul(s, x)
}

// googlenet is GoogLeNet (Inception v1) as torchvision builds it, without
// the auxiliary classifiers (gone in eval mode), but with the paper's 5×5
// convolutions in the third branch where torchvision has 3×3: a kernel size
// no other family has outside depthwise convs.
func googlenet(seed, size int64) (*net, *ir.Value) {
	b, x := newNet("googlenet", seed, true, 1, 3, size, size)
	basic := func(x *ir.Value, c, k, stride int64) *ir.Value { return b.relu(b.convBN(x, c, k, stride, 1)) }
	inception := func(x *ir.Value, c1, c3r, c3, c5r, c5, pool int64) *ir.Value {
		b1 := basic(x, c1, 1, 1)
		b2 := basic(basic(x, c3r, 1, 1), c3, 3, 1)
		b3 := basic(basic(x, c5r, 1, 1), c5, 5, 1)
		b4 := basic(b.maxPool(x, 3, 1, 1, true), pool, 1, 1)
		return b.op("Concat", []*ir.Value{b1, b2, b3, b4}, ir.AttrI("axis", 1))
	}
	x = b.maxPool(basic(x, 64, 7, 2), 3, 2, 0, true)
	x = b.maxPool(basic(basic(x, 64, 1, 1), 192, 3, 1), 3, 2, 0, true)
	x = inception(x, 64, 96, 128, 16, 32, 32)
	x = inception(x, 128, 128, 192, 32, 96, 64)
	x = b.maxPool(x, 3, 2, 0, true)
	x = inception(x, 192, 96, 208, 16, 48, 64)
	x = inception(x, 160, 112, 224, 24, 64, 64)
	x = inception(x, 128, 128, 256, 24, 64, 64)
	x = inception(x, 112, 144, 288, 32, 64, 64)
	x = inception(x, 256, 160, 320, 32, 128, 128)
	x = b.maxPool(x, 2, 2, 0, true)
	x = inception(x, 256, 160, 320, 32, 128, 128)
	x = inception(x, 384, 192, 384, 48, 128, 128)
	return b, b.classifier(b.flatten(b.globalAvgPool(x)), 1000)
}

// mobilenetV3Small is torchvision's MobileNetV3-Small: inverted residuals
// with HardSwish or ReLU, squeeze-excitation gated by HardSigmoid, batch
// norms folded.
func mobilenetV3Small(seed, size int64) (*net, *ir.Value) {
	b, x := newNet("mobilenet_v3_small", seed, true, 1, 3, size, size)
	x = b.hardSwish(b.convBN(x, 16, 3, 2, 1))
	for _, s := range []struct {
		k, expanded, out int64
		se, hs           bool
		stride           int64
	}{
		{3, 16, 16, true, false, 2}, {3, 72, 24, false, false, 2}, {3, 88, 24, false, false, 1},
		{5, 96, 40, true, true, 2}, {5, 240, 40, true, true, 1}, {5, 240, 40, true, true, 1},
		{5, 120, 48, true, true, 1}, {5, 144, 48, true, true, 1}, {5, 288, 96, true, true, 2},
		{5, 576, 96, true, true, 1}, {5, 576, 96, true, true, 1},
	} {
		act := b.relu
		if s.hs {
			act = b.hardSwish
		}
		in := b.dims(x)[1]
		y := x
		if s.expanded != in {
			y = act(b.convBN(y, s.expanded, 1, 1, 1))
		}
		y = act(b.convBN(y, s.expanded, s.k, s.stride, s.expanded))
		if s.se {
			y = b.squeezeExcite(y, makeDivisible(s.expanded/4, 8), b.relu, b.hardSigmoid)
		}
		y = b.convBN(y, s.out, 1, 1, 1)
		if s.stride == 1 && in == s.out {
			y = b.add(y, x)
		}
		x = y
	}
	x = b.hardSwish(b.convBN(x, 576, 1, 1, 1))
	x = b.hardSwish(b.classifier(b.flatten(b.globalAvgPool(x)), 1024))
	return b, b.classifier(x, 1000)
}

// makeDivisible is torchvision's _make_divisible: v rounded to a multiple
// of d, never more than 10% below v.
func makeDivisible(v, d int64) int64 {
	n := max(d, (v+d/2)/d*d)
	if 10*n < 9*v {
		n += d
	}
	return n
}

// convnextTinyStages12 is the first two stages of torchvision's
// ConvNeXt-Tiny (dims 96 and 192, three blocks each) with its stem,
// downsampling layer and head: depthwise 7×7, LayerNormalization over
// channels between Transposes, a MatMul MLP with GELU in its Erf form, and
// the layer-scale Mul. Layer scales are U(0.1, 0.5) rather than
// torchvision's 1e-6 start, which would make every block the identity.
func convnextTinyStages12(seed, size int64) (*net, *ir.Value) {
	b, x := newNet("convnext_tiny_s12", seed, true, 1, 3, size, size)
	// LayerNorm2d: LayerNorm over channels of an NCHW tensor.
	layerNorm2d := func(x *ir.Value) *ir.Value {
		return b.transpose(b.layerNorm(b.transpose(x, 0, 2, 3, 1)), 0, 3, 1, 2)
	}
	x = layerNorm2d(b.conv(x, 96, 4, 4, 1, true, 0))
	for stage, dim := range []int64{96, 192} {
		if stage > 0 {
			x = b.conv(layerNorm2d(x), dim, 2, 2, 1, true, 0)
		}
		for i := 0; i < 3; i++ {
			y := b.conv(x, dim, 7, 1, dim, true)
			y = b.layerNorm(b.transpose(y, 0, 2, 3, 1))
			y = b.linear(b.gelu(b.linear(y, 4*dim)), dim)
			y = b.mul(y, b.param("layer_scale", b.uniform(0.1, 0.5, dim)))
			x = b.add(b.transpose(y, 0, 3, 1, 2), x)
		}
	}
	return b, b.classifier(b.flatten(layerNorm2d(b.globalAvgPool(x))), 1000)
}

// vgg16 is VGG-16's convolutions (13 3×3 convs, 64 to 512 channels, five
// max pools) with a one-layer classifier on the flattened features: at
// 112×112 that is 4608×1000, where VGG-16's three 4096-wide layers would
// be 90% of the weights and turn the model into a GEMV benchmark.
func vgg16(seed, size int64) (*net, *ir.Value) {
	b, x := newNet("vgg16_112", seed, true, 1, 3, size, size)
	for _, stage := range []struct{ c, n int64 }{{64, 2}, {128, 2}, {256, 3}, {512, 3}, {512, 3}} {
		for i := int64(0); i < stage.n; i++ {
			x = b.relu(b.convBN(x, stage.c, 3, 1, 1))
		}
		x = b.maxPool(x, 2, 2, 0, false)
	}
	return b, b.classifier(b.flatten(x), 1000)
}
