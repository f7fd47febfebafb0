package opcase

// Cases of the recurrent family: the hand-written LSTM (ops_rnn.go) takes
// float32 with W, R and B known at compile time and full sequences; the
// kernel layer (codegen/kernel/ops_rnn.go) the rest, and GRU and RNN.
var rnnCases = map[string][]string{
	"RNN": {
		"RNN-14(hidden_size=4) T[3,2,5], T[1,4,5], T[1,4,4], T[1,8] -> 2",
		`RNN-14(hidden_size=3, direction="bidirectional", activations=["Relu" "LeakyRelu"], activation_alpha=[0.2], clip=2.5) T[4,2,3], T[2,3,3], T[2,3,3], T[2,6], int32[2]=[4 2], T[2,2,3] -> 2`,
		`RNN-14(hidden_size=2, direction="reverse", layout=1) T[2,3,4], T[1,2,4], T[1,2,2], _, int32[2]=[3 1], T[2,1,2] -> 2`,
	},
	"GRU": {
		"GRU-14(hidden_size=3) T[3,2,4], T[1,9,4], T[1,9,3], T[1,18] -> 2",
		`GRU-14(hidden_size=3, linear_before_reset=1, direction="bidirectional") T[3,2,4], T[2,9,4], T[2,9,3], T[2,18], int32[2]=[2 3], T[2,2,3] -> 2`,
		`GRU-14(hidden_size=2, layout=1, activations=["HardSigmoid" "Softsign"], activation_alpha=[0.3], activation_beta=[0.4], direction="reverse") T[2,4,3], T[1,6,3], T[1,6,2] -> 2`,
		`GRU-7(hidden_size=2, activations=["Sigmoid" "Tanh" "ThresholdedRelu" "Affine"], activation_alpha=[0.1 0.5], activation_beta=[0.2], direction="bidirectional") float[3,1,2], float[2,6,2], float[2,6,2], float[2,12] -> 2`,
	},
	"LSTM": {
		"LSTM-14(hidden_size=4) T[3,2,5], T[1,16,5]=rand, T[1,16,4]=rand, T[1,32]=rand -> 3",
		`LSTM-14(hidden_size=3, direction="bidirectional") T[4,2,3], T[2,12,3], T[2,12,3], T[2,24], int32[2]=[4 2], T[2,2,3], T[2,2,3], T[2,9] -> 3`,
		`LSTM-14(hidden_size=2, layout=1, input_forget=1, clip=1.5, activations=["Sigmoid" "Elu" "ScaledTanh"], activation_alpha=[0.5 1.2], activation_beta=[0.7], direction="reverse") T[2,3,4], T[1,8,4], T[1,8,2], T[1,16], _, T[2,1,2], T[2,1,2], T[1,6] -> 3`,
		`LSTM-14(hidden_size=3, activations=["Relu" "Softplus" "Tanh"]) T[2,1,2], T[1,12,2], T[1,12,3] -> 3`,
	},
}
