package autodiff

// ImageDecoder (ir/ops image_decoder.go).

func init() {
	notDifferentiable("", "it maps the bytes of an encoded image to uint8 pixels", "ImageDecoder")
}
