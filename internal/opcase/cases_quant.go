package opcase

// Cases of the quantization family (codegen/kernel/ops_quant.go). Scales
// and zero points come as constants ("=") and as graph inputs ("~": read at
// run time); explicit values hit ties (round half to even), saturation and
// int32 values that float32 cannot hold.
var quantCases = map[string][]string{
	"QuantizeLinear": {
		"QuantizeLinear-19 T[3,17], float=[0.05], uint8=[7]",
		"QuantizeLinear-19(axis=-2) T[2,5,17], float[5]~pos, int8[5]",
		"QuantizeLinear-21(axis=1, block_size=4) T[2,10,3], float[2,3,3]~pos, uint8[2,3,3]",
		"QuantizeLinear-21(output_dtype=5) T[4,17], float~[0.00001]",
		"QuantizeLinear-21 T[3,9], float=[0.001], uint16=[300]",
		"QuantizeLinear-10 float[8]~[0.5 1.5 2.5 -0.5 -1.5 300 -300 3.49], float=[1], int8=[0]",
		"QuantizeLinear-10 int32[9]~[7 -7 5 -5 2147483647 -2147483648 16777217 3 -1], float=[2], int8=[-3]",
		"QuantizeLinear-13 float[2,19], float~[0.07]",
		"QuantizeLinear-13(axis=0) float[4,5], float[4]~pos, int8[4]~[-3 0 1 5]",
		"QuantizeLinear-19 float16[3,17], float16=[0.0999], int8=[1]",
		"QuantizeLinear-23(precision=16) float[3,17], float=[0.0311]",
	},
	"DequantizeLinear": {
		// At opset 25, which takes every type T runs over.
		"DequantizeLinear-25 T[3,17], float=[0.05], T=[3]",
		"DequantizeLinear-25(axis=-1) T[2,3,5], float[5]~pos, T[5]",
		"DequantizeLinear-25(axis=1, block_size=2) T[2,5,3], float[2,3,3]~pos, T[2,3,3]",
		"DequantizeLinear-25 T[4,9], float16~[0.25]",
		"DequantizeLinear-21 int8[3,17], float=[0.05], int8=[3]",
		"DequantizeLinear-23(output_dtype=16) T[4,9], float=[0.3]",
		"DequantizeLinear-10 uint8[3,17], float=[0.05], uint8=[9]",
		"DequantizeLinear-13(axis=0) int8[4,5], float[4]~pos, int8[4]",
		"DequantizeLinear-10 int32[5]~[16777217 -16777219 2147483647 5 -2147483648], float=[0.5], int32=[3]",
		// float32(16777217) - float32(16777216) = 0: the difference is not taken in integers.
		"DequantizeLinear-10 int32[3]~[16777217 16777219 -5], float=[0.5], int32=[16777216]",
		"DequantizeLinear-19 int8[2,9], bfloat16~[0.125], int8~[2]",
	},
	"DynamicQuantizeLinear": {
		"DynamicQuantizeLinear-11 T[3,17] -> 3",
		"DynamicQuantizeLinear-11 T[4,5]~pos -> 3",
		"DynamicQuantizeLinear-11 T[3]~[-1 -2.5 -0.1] -> 3",
		"DynamicQuantizeLinear-11 T[2]~[0 0] -> 3",
		// scale 1/64 and x/scale -2.5, 252.5, 0.5, 1.5, 2.5, -1.5: ties.
		"DynamicQuantizeLinear-11 T[6]~[-0.0390625 3.9453125 0.0078125 0.0234375 0.0390625 -0.0234375] -> 3",
		"DynamicQuantizeLinear-11 T[64,1030] -> 3",
	},
	"MatMulInteger": {
		"MatMulInteger-10 T[3,17], T[17,9]",
		"MatMulInteger-10 T[2,4,7], int8[7,19], T[4], int8[19]",
		"MatMulInteger-10 T[5], uint8[5,6], T=[3], uint8=[4]",
		"MatMulInteger-10 T[3,1,4,5], T[2,5,3], T~[2]",
		"MatMulInteger-10 T[2,3,5], T[5], _, T~[1]",
		"MatMulInteger-10 T[4,6], T[6,5], T[4,1], T[1,5]",
	},
	"QLinearMatMul": {
		"QLinearMatMul-10 T[3,17], float=[0.02], T=[3], int8[17,9], float=[0.03], int8=[-1], float=[0.05], uint8=[100]",
		"QLinearMatMul-10 T[2,4,7], float[4]~pos, T[4], T[7,6], float[6]~pos, T[6], float[4]~pos, int8[4]",
		"QLinearMatMul-21 T[4,9], float16=[0.5], T=[1], T[9,5], float16=[0.25], T=[0], float16=[2], T=[7]",
		// A multiplier of float32(0.1) puts sums ending in 5 just above a tie
		// in float64, on it in float32.
		"QLinearMatMul-10 T[16,4], float=[0.1], T=[0], T[4,16], float=[1], T=[0], float=[1], T=[0]",
		"QLinearMatMul-10 T[3,8], float~[0.1], T~[2], T[8,33], float~[0.2], T~[1], float~[0.7], T~[5]",
	},
	"ConvInteger": {
		"ConvInteger-10 T[1,3,7,9], int8[4,3,3,3]",
		"ConvInteger-10(pads=[1 1 1 1]) T[2,3,6,17], T[5,3,3,3], T=[4], T[5]",
		"ConvInteger-10(group=2, strides=[2 1], dilations=[1 2], pads=[1 0 1 2]) T[1,4,9,11], int8[6,2,3,2], T~[7], int8[6]",
		"ConvInteger-10(auto_pad=\"SAME_UPPER\", strides=[2 2]) T[1,2,7,7], uint8[3,2,3,3], T=[1], uint8=[2]",
		"ConvInteger-10 T[2,3,17], int8[4,3,5]",
	},
	"QLinearConv": {
		"QLinearConv-10(pads=[1 1 1 1]) T[1,3,8,9], float=[0.05], T=[2], int8[4,3,3,3], float[4]~pos, int8[4], float=[0.9], uint8=[128], int32[4]",
		"QLinearConv-10(group=3, strides=[2 2]) T[2,6,9,9], float~[0.1], T~[1], T[3,2,2,2], float~[0.2], T~[2], float~[0.3], int8~[-4]",
		"QLinearConv-10 T[1,2,9,9], float=[0.5], T=[0], T[2,2,2,2], float=[0.25], T=[0], float=[2], T=[3]", // ties: acc/16
		"QLinearConv-10(pads=[2 1]) T[1,2,19], float=[0.125], T=[0], T[3,2,4], float[3]~pos, T[3], float=[0.5], T=[9], int32[3]",
	},
}
