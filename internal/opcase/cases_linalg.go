package opcase

// Cases of the linear algebra family: the hand-written GEMM
// (ops_linalg.go) takes float32 with B known at compile time or plain;
// the kernel layer (codegen/kernel/ops_linalg.go) the other types, B
// transposed or scaled at run time, C scaled at run time, and Einsum.
var linalgCases = map[string][]string{
	"MatMul": {
		"MatMul-13 T[3,4], T[4,5]",
		"MatMul-13 T[2,1,3,4], T[3,4,6]",
		"MatMul-13 T[4], T[2,4,3]",
		"MatMul-13 T[2,3,17], T[17]",
		"MatMul-13 T[6], T[6]",
		"MatMul-13 T[5,17], T[17,9]=rand",
		"MatMul-13 T[1,3,2,5], T[2,1,5,4]",
		"MatMul-1 float[2,3], float[3,2]",
	},
	"Gemm": {
		"Gemm-13 T[3,4], T[4,5], T[5]",
		"Gemm-13(transA=1, transB=1, alpha=0.5, beta=2.0) T[4,3], T[5,4], T[3,5]",
		"Gemm-13(transB=1) T[3,4], T[5,4]=rand, T[1,5]=rand",
		"Gemm-13(alpha=2.0, beta=-1.0) T[3,4], T[4,5], T[3,1]",
		"Gemm-13(alpha=0.5, beta=1.5) T[2,3], T[3,4], T[4]",
		"Gemm-13(transA=1, beta=0.5) T[4,3], T[4,17]=rand, T=[3]",
		"Gemm-13 T[3,4], T[4,5]",
		"Gemm-6(broadcast=1, transB=1) float[3,4], float[2,4], float[2]",
		"Gemm-9 int32[2,3], int32[3,4], int32[2,4]",
	},
	"Einsum": {
		`Einsum-12(equation="ij,jk->ik") T[3,4], T[4,5]`,
		`Einsum-12(equation="bii->bi") T[2,3,3]`,
		`Einsum-12(equation="i,i") T[5], T[5]`,
		`Einsum-12(equation="ij->ji") T[3,4]`,
		`Einsum-12(equation="...ij,...jk->...ik") T[2,1,3,4], T[3,4,2]`,
		`Einsum-12(equation="ij,jk,kl") T[2,3], T[3,4], T[4,2]`,
		`Einsum-12(equation="ii") T[4,4]`,
		`Einsum-12(equation="bhid, bhjd -> bhij") T[1,2,3,4], T[1,2,5,4]`,
	},
}
