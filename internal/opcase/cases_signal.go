package opcase

// Cases of the signal family (codegen/kernel/ops_signal.go): periodic and
// symmetric windows of every output type, forward and inverse transforms
// of real and complex lines along any axis, zero-padded, truncated and
// one-sided, and frames with and without a window; mel filter banks of
// edges read at run time, below and up to the Nyquist frequency, with
// filters narrower than a bin, into float, half and integer outputs.
var signalCases = map[string][]string{
	"HannWindow":     {"HannWindow-17 T=[10]", "HannWindow-17(periodic=0, output_datatype=11) T=[7]"},
	"HammingWindow":  {"HammingWindow-17 T=[10]", "HammingWindow-17(periodic=0, output_datatype=10) T=[5]"},
	"BlackmanWindow": {"BlackmanWindow-17 T=[10]", "BlackmanWindow-17(periodic=0, output_datatype=7) T=[6]"},
	"DFT": {
		"DFT-20 T[2,8,1]", "DFT-20 T[2,8,2]", "DFT-20(inverse=1) T[3,6,2]",
		"DFT-20(onesided=1) T[2,7,1]", "DFT-20(onesided=1, inverse=1) T[2,5,2]",
		"DFT-20(onesided=1, inverse=1) T[2,4,1], int64=[7]",
		"DFT-20 T[4,3,5,2], _, int64=[1]", "DFT-20 T[2,5,2], int64=[8]", "DFT-20(inverse=1) T[2,6,2], int64=[4], int64=[-2]",
		"DFT-17(axis=2) T[3,2,6,1]", "DFT-17(onesided=1, axis=1) T[2,9,2]",
	},
	"STFT": {
		"STFT-17 T[2,20,1], int64=[4], T[8]", "STFT-17(onesided=1) T[1,17,2], int64=[3], T[6]~[1 2 3 4 5 6], int64=[6]",
		"STFT-17(onesided=1) T[2,16,1], int64=[5], _, int64=[7]", "STFT-17 T[1,9,2], int64=[2], _, int64=[4]",
	},
	"MelWeightMatrix": {
		"MelWeightMatrix-17 T=[8], T=[16], T~[8192], float~[0], float~[4096]",
		"MelWeightMatrix-17 T=[13], T=[512], T~[16000], float~[20], float~[7600]",
		"MelWeightMatrix-17(output_datatype=10) T[1]=[40], T[1]=[256], T[1]~[22050], float16~[125.5], float16[1]~[3800]",
		"MelWeightMatrix-17(output_datatype=11) T=[24], T=[30], T~[8000], double~[300], double~[3999]",
		"MelWeightMatrix-17(output_datatype=7) T=[5], T=[64], T~[11025], float~[80], float~[5000]",
	},
}
