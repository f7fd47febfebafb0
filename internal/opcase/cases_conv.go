package opcase

// Cases of the convolution and pooling families: the hand-written kernels
// (ops_conv*.go, winograd.go, ops_convtranspose.go, ops_pool.go) take
// float32 1-D and 2-D convolutions (weights known at compile time or not),
// ungrouped float32 ConvTransposes (a GEMM, then the kernel layer's sum)
// and 2-D pools without Indices; the kernel layer
// (codegen/kernel/ops_conv.go, ops_pool.go) every other rank, group, type
// and output.
var convCases = map[string][]string{
	"Conv": {
		"Conv-22 T[1,3,7,7], T[4,3,3,3]=rand",
		"Conv-22(pads=[1 1 1 1]) T[2,3,7,7], T[4,3,3,3], T[4]",
		"Conv-22(strides=[2 2], pads=[1 0 0 1], dilations=[2 1]) T[1,2,9,8], T[3,2,3,2], T[3]",
		`Conv-22(group=2, auto_pad="SAME_UPPER") T[1,4,6,6], T[6,2,3,3], T[6]`,
		`Conv-22(group=4, auto_pad="SAME_LOWER", strides=[2 2]) T[1,4,7,7], T[4,1,3,3]`,
		"Conv-22 T[1,4,5,5], T[3,4,1,1], T[3]=rand",
		`Conv-22(auto_pad="VALID") T[2,3,9], T[5,3,4], T[5]`,
		"Conv-22(pads=[1 2], strides=[2]) T[1,2,9], T[4,2,3]=rand",
		"Conv-22(pads=[1 0 1 1 1 0], group=2) T[1,4,4,5,3], T[2,2,3,2,2], T[2]",
		"Conv-11(kernel_shape=[3 3]) float[1,2,5,5], float[2,2,3,3]=rand, float[2]=rand",
	},
	"ConvTranspose": {
		"ConvTranspose-22 T[1,2,3,3], T[2,3,3,3]",
		"ConvTranspose-22(strides=[2 2]) T[1,3,4,4], T[3,2,2,2], T[2]",
		"ConvTranspose-22(strides=[3 2], pads=[1 0 0 1], output_padding=[1 1]) T[1,2,3,4], T[2,2,2,2], T[2]",
		"ConvTranspose-22(strides=[2 2], dilations=[2 2], group=2) T[1,4,3,3], T[4,1,3,3]",
		`ConvTranspose-22(strides=[2], output_shape=[10], auto_pad="SAME_UPPER") T[1,2,4], T[2,3,3]`,
		`ConvTranspose-22(auto_pad="SAME_LOWER", strides=[2 2 1]) T[1,2,2,3,2], T[2,2,3,2,2]`,
		"ConvTranspose-22(strides=[2 2], output_shape=[1 2 9 9]) T[1,1,4,4], T[1,2,3,3], T[2]",
		"ConvTranspose-22(strides=[2 2], pads=[1 1 1 1]) T[1,2,5,5], T[2,1,3,3]=rand, T[1]=rand",
		"ConvTranspose-22(strides=[3 3], dilations=[2 1], pads=[2 1 0 3]) T[1,2,3,4], T[2,2,4,5], T[2]",
		"ConvTranspose-22(strides=[9 8], pads=[0 1 2 0]) T[1,2,2,3], T[2,1,3,10], T[1]",
	},
	"MaxPool": {
		"MaxPool-22(kernel_shape=[3 3], pads=[1 1 1 1], strides=[2 2]) T[2,3,7,7]",
		"MaxPool-22(kernel_shape=[2 3], dilations=[2 1], ceil_mode=1, strides=[2 2]) T[1,2,8,9]",
		"MaxPool-22(kernel_shape=[3], pads=[1 1]) T[2,3,9]",
		"MaxPool-22(kernel_shape=[2 2 2], strides=[2 2 2], ceil_mode=1) T[1,2,4,5,3]",
		"MaxPool-22(kernel_shape=[3 3], pads=[1 1 1 1]) T[1,2,5,6] -> 2",
		"MaxPool-22(kernel_shape=[2 2], storage_order=1, strides=[1 2]) T[2,2,4,5] -> 2",
		`MaxPool-22(kernel_shape=[3 2], auto_pad="SAME_UPPER") T[1,1,5,4] -> 2`,
		"MaxPool-22(kernel_shape=[3], storage_order=1, pads=[2 2]) T[1,2,4] -> 2",
		"MaxPool-8(kernel_shape=[2 2]) float[1,1,4,4] -> 2",
		"MaxPool-12(kernel_shape=[2 2], pads=[1 0 0 1]) float[1,1,4,4]~[1 NaN 2 3 4 5 NaN 7 8 9 Inf 11 12 -Inf 14 15] -> 2",
	},
	"AveragePool": {
		"AveragePool-22(kernel_shape=[3 3], pads=[1 1 1 1], strides=[2 2]) T[2,3,7,7]",
		"AveragePool-22(kernel_shape=[3 3], pads=[1 1 1 1], count_include_pad=1, ceil_mode=1, strides=[2 2]) T[1,2,6,6]",
		"AveragePool-22(kernel_shape=[2], ceil_mode=1, strides=[2]) T[2,3,7]",
		"AveragePool-22(kernel_shape=[2 2 2], pads=[1 0 1 0 1 0]) T[1,2,3,4,5]",
		`AveragePool-22(kernel_shape=[3 3], dilations=[2 2], auto_pad="SAME_UPPER") T[1,1,7,7]`,
		"AveragePool-7(kernel_shape=[2 2], pads=[1 1 1 1], count_include_pad=1) float[1,1,4,4]",
	},
	"MaxUnpool": {
		"MaxUnpool-22(kernel_shape=[2 2], strides=[2 2]) T[1,2,2,2], int64[1,2,2,2]~[0 3 9 14 16 18 26 31]",
		"MaxUnpool-22(kernel_shape=[2 2], strides=[2 2]) T[1,1,2,2], int64[1,1,2,2]~[5 7 13 15], int64[4]=[1 1 5 5]",
		"MaxUnpool-11(kernel_shape=[3], pads=[1 1], strides=[2]) T[2,1,3], int64[2,1,3]~[0 2 2 1 3 4]",
		"MaxUnpool-9(kernel_shape=[2]) float[1,1,3], int64[1,1,3]~[0 3 1]",
	},
	"DeformConv": {
		"DeformConv-22(pads=[1 1 1 1]) T[1,2,4,4], T[3,2,2,2], T[1,8,5,5]~unit",
		"DeformConv-22(strides=[2 2], dilations=[1 2]) T[2,4,6,7], T[2,4,2,3], T[2,12,3,2], T[2], T[2,6,3,2]",
		"DeformConv-22(group=2, offset_group=2) T[1,4,4,4], T[4,2,2,2], T[1,16,3,3], _, T[1,8,3,3]",
		"DeformConv-19(kernel_shape=[3]) float[1,2,9], float[2,2,3], float[1,3,7]",
	},
	"RoiAlign": {
		"RoiAlign-22(output_height=3, output_width=2, sampling_ratio=2, spatial_scale=0.5) T[2,3,8,8], T[3,4]~[0 0 9 9 2 3 14 12 -4 5 20 30], int64[3]~[0 1 1]",
		`RoiAlign-22(mode="max", output_height=2, output_width=3, sampling_ratio=3) T[1,2,6,7], T[2,4]~[0.5 1 4 5.5 -2 -1 8 9], int64[2]~[0 0]`,
		`RoiAlign-16(coordinate_transformation_mode="output_half_pixel", output_height=4, output_width=4, sampling_ratio=1) float[1,1,5,5], float[2,4]~[1 1 1.5 1.2 0 0 4 4], int64[2]~[0 0]`,
		"RoiAlign-10(output_height=2, output_width=2, sampling_ratio=2) float[2,1,4,4], float[2,4]~[0 0 3 3 1 0.5 2.5 3.5], int64[2]~[1 0]",
	},
	"Col2Im": {
		"Col2Im-18 T[1,5,5], int64[2]=[5 5], int64[2]=[1 5]",
		"Col2Im-18(strides=[2 1], pads=[1 0 1 0], dilations=[1 2]) T[2,12,6], int64[2]=[5 6], int64[2]=[2 3]",
		"Col2Im-18(dilations=[2]) T[1,6,3], int64[1]=[7], int64[1]=[3]",
		"Col2Im-18(strides=[2 2 1]) T[1,8,12], int64[3]=[5 6 3], int64[3]=[2 2 2]",
	},
	"LpPool": {
		"LpPool-22(kernel_shape=[3 3], pads=[1 1 1 1], strides=[2 2]) T[2,3,7,7]",
		"LpPool-22(kernel_shape=[2], p=1, ceil_mode=1, strides=[2]) T[2,3,7]",
		"LpPool-22(kernel_shape=[2 2 2], p=3, pads=[1 0 1 0 1 0]) T[1,2,3,4,5]",
		`LpPool-18(kernel_shape=[3 3], dilations=[2 2], auto_pad="SAME_UPPER") float[1,1,7,7]`,
		"LpPool-11(kernel_shape=[2 2], p=4) float[1,1,4,4]",
		"LpPool-11(kernel_shape=[2]) float[1,1,4]~[NaN 1 Inf -3]",
	},
}
