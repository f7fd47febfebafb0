package opcase

// Cases of the reduce and normalization families
// (codegen/kernel/ops_reduce.go, ops_norm.go): axes as attributes and as
// inputs, negative axes, keepdims, noop_with_empty_axes, empty
// reductions, reductions along contiguous and strided axes, NaN.
var reduceCases = map[string][]string{
	"ReduceSum": {
		"ReduceSum-13 T[3,4,5], int64[1]=[1]",
		"ReduceSum-13(keepdims=0) T[2,3,17], int64[2]=[-1 0]",
		"ReduceSum-11(axes=[1 2], keepdims=0) T[4,5,6]",
		"ReduceSum-13(keepdims=0) T[5,67], int64[1]=[1]",
		"ReduceSum-13 T[3,33]",
		"ReduceSum-13(noop_with_empty_axes=1) T[3,5]",
		"ReduceSum-13(noop_with_empty_axes=1) T[3,5], int64[0]=[]",
		"ReduceSum-13 T[3,0,4], int64[1]=[1]",
		"ReduceSum-13(keepdims=0) T[67,1,5], int64[2]=[0 1]",
	},
	"ReduceMean": {
		"ReduceMean-18 float[40,1000], int64[1]=[1]", // split across threads
		"ReduceMean-18 float[1,40,1000], int64[1]=[2]",
		"ReduceMean-18 T[4,33], int64[1]=[-1]",
		"ReduceMean-13(axes=[0 2]) T[3,4,5]",
		"ReduceMean-18(keepdims=0) T[2,3,4,5], int64[2]=[3 2]",
		"ReduceMean-18 T[2,0,3], int64[1]=[1]",
		"ReduceMean-1 T[6,7]",
	},
	"ReduceProd": {
		"ReduceProd-18 T[5,4], int64[1]=[1]",
		"ReduceProd-13(axes=[-2], keepdims=0) T[3,2,6]",
		"ReduceProd-18 T[2,0], int64[1]=[-1]",
	},
	"ReduceMax": {
		"ReduceMax-18 float[40,1000], int64[1]=[0]",
		"ReduceMax-18(keepdims=0) T[3,17], int64[1]=[1]",
		"ReduceMax-13(axes=[0]) T[5,7]",
		"ReduceMax-18 T[4,0], int64[1]=[1]",
		"ReduceMax-20 T[2,3,4]",
		"ReduceMax-18 float[2,3]~[1 NaN 2 3 4 5], int64[1]=[1]",
		"ReduceMax-18 float[3,2]~[1 NaN 2 3 4 5], int64[1]=[0]",
	},
	"ReduceMin": {
		"ReduceMin-18(keepdims=0) T[3,17], int64[1]=[1]",
		"ReduceMin-13(axes=[0 -1]) T[5,2,7]",
		"ReduceMin-18 T[4,0], int64[1]=[1]",
		"ReduceMin-18 float[2,3]~[1 2 NaN 3 4 5], int64[1]=[1]",
	},
	"ReduceSumSquare": {
		"ReduceSumSquare-18 T[3,17], int64[1]=[1]",
		"ReduceSumSquare-13(axes=[0], keepdims=0) T[6,5]",
	},
	"ReduceL1": {
		"ReduceL1-18 T[3,17], int64[1]=[1]",
		"ReduceL1-13(axes=[0 1]) T[2,3,5]",
	},
	"ReduceL2": {
		"ReduceL2-18 T[3,17], int64[1]=[-1]",
		"ReduceL2-13(axes=[1], keepdims=0) T[4,5,2]",
		"ReduceL2-18 T[3,0], int64[1]=[1]",
	},
	"ReduceLogSum": {
		"ReduceLogSum-18 T[3,17]~pos, int64[1]=[1]",
		"ReduceLogSum-13(axes=[0]) T[5,4]~pos",
		"ReduceLogSum-18 T[3,0], int64[1]=[1]",
	},
	"ReduceLogSumExp": {
		"ReduceLogSumExp-18 T[3,17], int64[1]=[1]",
		"ReduceLogSumExp-13(axes=[0], keepdims=0) T[5,4]",
		"ReduceLogSumExp-18 T[3,0], int64[1]=[1]",
		"ReduceLogSumExp-18 float[3,2]~[1000 999 -1e300 -1e300 NaN 1], int64[1]=[1]",
	},
	"ArgMax": {
		"ArgMax-13(axis=1) float[300,120]",
		"ArgMax-13(axis=1) T[3,17]",
		"ArgMax-13(axis=-1, keepdims=0, select_last_index=1) T[4,5]",
		"ArgMax-11(axis=0) T[5,3]",
		"ArgMax-13(axis=1) float[2,4]~[1 NaN 3 NaN 2 2 1 2]",
		"ArgMax-13(axis=1, select_last_index=1) float[2,4]~[1 NaN 3 NaN 2 2 1 2]",
	},
	"ArgMin": {
		"ArgMin-13(axis=1) T[3,17]",
		"ArgMin-13(axis=0, keepdims=0, select_last_index=1) T[6,4]",
		"ArgMin-1(axis=2) T[2,3,4]",
		"ArgMin-13(axis=1) float[2,4]~[1 NaN -3 NaN 2 -2 1 -2]",
	},
	"Softmax": {
		"Softmax-13 float[64,600]", "Softmax-13(axis=0) float[600,64]",
		"Softmax-13 T[3,17]", "Softmax-13 T[2,67]", "Softmax-13(axis=1) T[2,5,6]",
		"Softmax-11(axis=1) T[2,3,4]", "Softmax-11(axis=0) T[5]",
		"Softmax-13 float[2,3]~[1000 999 -1000 1 NaN 2]",
	},
	"LogSoftmax": {
		"LogSoftmax-13 T[3,17]", "LogSoftmax-13 T[2,67]", "LogSoftmax-13(axis=0) T[4,6]",
		"LogSoftmax-11(axis=1) T[2,3,4]",
	},
	"Hardmax": {
		"Hardmax-13 T[3,17]", "Hardmax-11(axis=1) T[2,3,4]", "Hardmax-13(axis=0) T[4,5]",
		"Hardmax-13 float[2,3]~[1 3 3 NaN 2 NaN]",
	},
	"CumSum": {
		"CumSum-14 float[200,200], int64=[0]",
		"CumSum-14 T[3,17], int64=[1]",
		"CumSum-14(exclusive=1, reverse=1) T[4,5,3], int32=[-2]",
		"CumSum-11(reverse=1) T[7], int64[1]=[0]",
		"CumSum-11(exclusive=1) T[6,5], int32[1]=[0]",
	},
	"CumProd": {
		"CumProd-26 T[3,17]~unit, int64=[1]",
		"CumProd-26(exclusive=1, reverse=1) T[4,5,3], int32=[-2]",
		"CumProd-26(reverse=1) T[7], int64[1]=[0]",
		"CumProd-26(exclusive=1) T[6,5], int32[1]=[0]",
		"CumProd-26 float[6]~[2 NaN 3 Inf 0 -1], int64=[0]",
		"CumProd-26 int64[4]~[4294967296 4294967296 3 -1], int64=[0]",
	},
	"TopK": {
		"TopK-11 float[300,120], int64[1]=[5] -> 2",
		"TopK-11 T[3,17], int64[1]=[4] -> 2",
		"TopK-11(axis=0, largest=0) T[6,5], int64[1]=[3] -> 2",
		"TopK-1(k=2, axis=1) T[3,4] -> 2",
		"TopK-10 T[2,9], int64[1]=[9] -> 2",
		"TopK-11(sorted=0) float[2,4]~[1 NaN 3 NaN 2 2 1 2], int64[1]=[3] -> 2",
		"TopK-11(largest=0) float[2,4]~[1 NaN 3 NaN 2 2 1 2], int64[1]=[3] -> 2",
	},
	"GlobalAveragePool": {
		"GlobalAveragePool-22 float[2,64,16,16]",
		"GlobalAveragePool-22 T[2,3,5,7]", "GlobalAveragePool-22 T[1,4,3]",
		"GlobalAveragePool-1 float[1,17,7,7]",
		"GlobalAveragePool-22 float[1,96,20,20]", // batch 1: threads split the channels
	},
	"GlobalMaxPool": {
		"GlobalMaxPool-22 T[2,3,5,7]", "GlobalMaxPool-22 T[1,4,3]",
		"GlobalMaxPool-22 float[1,64,24,24]",
		"GlobalMaxPool-1 float[1,2,2,2]~[1 NaN 3 4 -1 -2 -3 -4]",
	},
	"BatchNormalization": {
		"BatchNormalization-15(training_mode=1) float[4,8,40,40], float[8], float[8], float[8], float[8]~pos -> 3",
		"BatchNormalization-15 T[2,3,4,5], T[3], T[3], T[3], T[3]~pos",
		"BatchNormalization-9(epsilon=0.01) T[2,3,4], T[3]=[1 2 0.5], T[3]=[0 1 -1], T[3]=[0.25 0.5 -1], T[3]=[1 2 0.5]",
		"BatchNormalization-15(training_mode=1) T[2,3,4,5], T[3], T[3], T[3], T[3]~pos -> 3",
		"BatchNormalization-14(training_mode=1, momentum=0.5) T[3,2,17], T[2], T[2], T[2], T[2]~pos",
		"BatchNormalization-7(spatial=0) T[2,3,2], T[3,2], T[3,2], T[3,2], T[3,2]~pos",
		"BatchNormalization-15 T[1,1], T[1], T[1], T[1], T[1]~pos",
	},
	"InstanceNormalization": {
		"InstanceNormalization-6 T[2,3,4,5], T[3], T[3]",
		"InstanceNormalization-6(epsilon=0.01) T[1,2,17], T[2], T[2]",
	},
	"LayerNormalization": {
		"LayerNormalization-17 float[64,600], float[600], float[600] -> 3",
		"LayerNormalization-17 T[2,3,17], T[17], T[17]",
		"LayerNormalization-17(axis=1) T[2,3,4], T[3,4], T[3,4] -> 3",
		"LayerNormalization-17(axis=-2, epsilon=0.001) T[2,5,6], T[6] -> 3",
		"LayerNormalization-17(axis=1, stash_type=11) T[2,3,4], T[1,4] -> 3",
		"LayerNormalization-17(stash_type=10) T[4,6], T[6], T[6] -> 3",
		"LayerNormalization-17(axis=0) T[3,5], T[5], T[3,5] -> 2",
	},
	"RMSNormalization": {
		"RMSNormalization-23 T[2,3,17], T[17]",
		"RMSNormalization-23(axis=1) T[2,3,4], T[3,4]",
		"RMSNormalization-23(axis=-2, epsilon=0.001) T[2,5,6], T[6]",
		"RMSNormalization-23(axis=1, stash_type=11) T[2,3,4], T[1,4]",
		"RMSNormalization-23(axis=0) T[3,5], T[3,1]",
		"RMSNormalization-23 float[2,3]~[0 0 0 NaN 1 2], float[3]",
	},
	"LpNormalization": {
		"LpNormalization-22 T[3,17]", "LpNormalization-22(axis=0, p=1) T[4,5]",
		"LpNormalization-22(axis=1) T[2,3,4]", "LpNormalization-1(axis=-2, p=1) float[2,3,4]",
		"LpNormalization-22 float[2,3]~[0 0 0 3 4 Inf]",
	},
	"GroupNormalization": {
		"GroupNormalization-21(num_groups=2) T[2,4,3,5], T[4], T[4]",
		"GroupNormalization-21(num_groups=3, epsilon=0.01) T[1,3,17], T[3], T[3]",
		"GroupNormalization-21(num_groups=1) T[2,6], T[6], T[6]",
		"GroupNormalization-18(num_groups=2) T[2,4,3,5], T[2], T[2]",
		"GroupNormalization-18(num_groups=4) float[1,4,2,2], float[4], float[4]",
	},
	"LRN": {
		"LRN-13(size=3) T[2,5,4,4]",
		"LRN-13(size=4, alpha=0.001, beta=0.5, bias=2.0) T[1,7,3]",
		"LRN-1(size=5) T[1,3,1,1]",
	},
}
