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
	"Det": {"Det-22 T[3,3]", "Det-22 T[2,3,2,2]", "Det-22 T[4,4]", "Det-11 float[2,1,1]", "Det-22 T[2,0,0]",
		"Det-22 float[3,3]~[1 2 3 4 5 6 7 8 9]", "Det-22 float[2,2]~[0 1 1 0]"},
	"Attention": {
		"Attention-23 T[2,3,4,8], T[2,3,6,8], T[2,3,6,5]",
		"Attention-23(q_num_heads=4, kv_num_heads=2) T[2,3,32], T[2,5,16], T[2,5,12]",
		"Attention-23(is_causal=1) T[1,2,4,8], T[1,2,4,8], T[1,2,4,8]",
		"Attention-23(scale=0.5) T[2,3,4,8], T[2,3,6,8], T[2,3,6,8], T[4,6]",
		"Attention-23 T[2,2,4,8], T[2,2,6,8], T[2,2,6,8], bool[2,1,4,5]",
		"Attention-23(qk_matmul_output_mode=2, is_causal=1) T[1,4,3,8], T[1,2,3,8], T[1,2,3,8], T[3,7], T[1,2,4,8], T[1,2,4,8] -> 4",
		"Attention-23(softcap=2.0, qk_matmul_output_mode=1) T[1,2,3,4], T[1,2,5,4], T[1,2,5,4] -> 4",
		"Attention-23(qk_matmul_output_mode=3, q_num_heads=2, kv_num_heads=1) T[2,3,8], T[2,4,4], T[2,4,6], T[2,2,3,4], T[2,1,2,4], T[2,1,2,6] -> 4",
		"Attention-23(softcap=3.0, is_causal=1) T[2,2,5,4], T[2,2,3,4], T[2,2,3,4], _, T[2,2,2,4], T[2,2,2,4] -> 4",
		"Attention-24(is_causal=1) T[2,2,3,8], T[2,2,6,8], T[2,2,6,8], _, _, _, int64[2]~[4 6]",
		"Attention-24(qk_matmul_output_mode=0) T[2,2,3,8], T[2,2,6,8], T[2,2,6,8], T[3,6], _, _, int64[2]~[2 5] -> 4",
		"Attention-23 float[1,1,2,2], float[1,1,3,2], float[1,1,3,2], float[1,1,2,3]~[-Inf -Inf -Inf 0 -Inf 1]",
	},
	"RotaryEmbedding": {
		"RotaryEmbedding-23 T[2,3,4,8], T[2,4,4], T[2,4,4]",
		"RotaryEmbedding-23(interleaved=1) T[2,3,4,8], T[2,4,4], T[2,4,4]",
		"RotaryEmbedding-23(num_heads=2, rotary_embedding_dim=4) T[2,5,16], T[6,2], T[6,2], int64[2,5]~[0 1 2 3 4 5 4 3 2 1]",
		"RotaryEmbedding-23(num_heads=3, interleaved=1, rotary_embedding_dim=2) T[1,4,12], T[1,4,1], T[1,4,1]",
		"RotaryEmbedding-23(interleaved=1, rotary_embedding_dim=6) T[1,2,3,8], T[5,3], T[5,3], int64[1,3]~[0 4 2]",
	},
}
