package opcase

// NaN and ±Inf through the hand-written kernels (the kernel layer's
// families carry theirs): a NaN in a pooling window gives NaN, as the
// reference (numpy's maximum) does.
var nanCases = map[string][]string{
	"MaxPool": {
		"MaxPool-12(kernel_shape=[2 2]) float[1,1,4,4]~[NaN 1 2 3 4 5 6 7 8 9 Inf 11 12 -Inf 14 NaN]",
		"MaxPool-12(kernel_shape=[2 2], strides=[2 2]) float[1,2,4,4]~[1 NaN 2 3 4 5 6 7 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 8 9 10 11 12 13 NaN 15]",
	},
	"Gemm": {"Gemm-13 float[2,3]~[NaN 1 2 3 Inf 5], float[3,4]=rand"},
	"Pow": {
		"Pow-15 float[20]~[0.75 0.75 1.5 1.5 -0.5 -2 0 Inf -Inf -Inf 1 -1 NaN 2 0 -0 -Inf -Inf -2 -Inf]," +
			" float[20]~[-Inf Inf -Inf Inf -Inf Inf -Inf -Inf 3 -3 NaN Inf 0 NaN -1 -1 0.5 -0.5 0.5 2]",
	},
	// Saturation at both ends, NaN (0) and ±Inf, exact halves (to even).
	"QuantizeLinear": {
		"QuantizeLinear-13 float[18]~[NaN Inf -Inf 1e30 -1e30 0.125 0.375 -0.125 -0.375 6.4 -6.4 12.7 12.8 -12.8 -12.9 0 -0 3.3], float=[0.05], uint8=[128]",
		"QuantizeLinear-13 float[18]~[NaN Inf -Inf 1e30 -1e30 0.125 0.375 -0.125 -0.375 6.4 -6.4 12.7 12.8 -12.8 -12.9 0 -0 3.3], float=[0.05], int8=[-3]",
	},
	"Conv": {"Conv-11 float[1,1,3,3]~[NaN 1 2 3 4 5 6 7 8], float[2,1,2,2]=rand"},
	// Whole 16-float vectors, which take AVX-512's vscalefps and
	// vrcp14ps (kernelHost's FastMath): the edges of Exp's range,
	// overflow, underflow to subnormals and 0, ±0, ±Inf, NaN.
	"Exp":        {"Exp-13 float[32]~[NaN Inf -Inf 0 -0 1 -1 88.72 88.73 89 100 -87.3 -87.4 -95 -103.9 -104 -110 1e30 -1e30 0.5 -0.5 10 -10 20 -20 40 -40 60 -60 80 -80 3]"},
	"Reciprocal": {"Reciprocal-13 float[32]~[NaN Inf -Inf 0 -0 1 -1 3 -3 1e-39 -1e-39 1e38 -1e38 3.4e38 1e-30 7 0.1 -0.1 1e-5 1e5 2 -2 0.3 1.7 9 -9 1e20 1e-20 5 6 -7 0.25]"},
	"Sigmoid":    {"Sigmoid-13 float[32]~[NaN Inf -Inf 0 -0 1 -1 88.72 -88.72 89 -89 100 -100 -104 104 1e30 -1e30 0.5 -0.5 10 -10 20 -20 40 -40 60 -60 80 -80 3 -3 7]"},
}
