package autodiff

// The recurrent networks (ir/ops rnn.go).

func init() {
	notDifferentiable("", "not implemented: backpropagation through time over the gates of each step", "RNN", "GRU", "LSTM")
}
