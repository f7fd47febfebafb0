package opcase

// Cases of the random ops (codegen/kernel/ops_random.go): every one has a
// seed, so that an engine's draw is the reference's, bit for bit; every
// output type, half precision included, ranges and scales off the
// defaults, Bernoulli's probabilities at and inside [0, 1] (and outside
// it: unit values are negative too), Multinomial's NaN and -Inf
// log-probabilities, and empty draws.
var randomCases = map[string][]string{
	"RandomUniform": {
		"RandomUniform-22(shape=[3 5 7], dtype=T, low=-2.5, high=4.0, seed=1.0)",
		"RandomUniform-1(shape=[2 3], seed=7.0)", "RandomUniform-22(shape=[0 3], dtype=11, seed=1.0)",
	},
	"RandomNormal": {
		"RandomNormal-22(shape=[4 33], dtype=T, mean=1.5, scale=0.25, seed=2.0)",
		"RandomNormal-1(shape=[17], seed=3.0)", "RandomNormal-1(shape=[9], dtype=11, seed=-3.5)",
	},
	"RandomUniformLike": {
		"RandomUniformLike-22(dtype=11, low=-1.0, high=1.0, seed=4.0) T[5,6]",
		"RandomUniformLike-1(seed=5.0) float[7]", "RandomUniformLike-22(dtype=16, seed=6.0) int64[3,3]",
	},
	"RandomNormalLike": {
		"RandomNormalLike-22(dtype=1, mean=-3.0, scale=2.0, seed=7.0) T[4,9]",
		"RandomNormalLike-1(dtype=10, seed=8.0) bool[2,5]",
	},
	"Multinomial": {
		"Multinomial-22(sample_size=50, seed=1.0) T[3,6]",
		"Multinomial-7(sample_size=9, dtype=7, seed=2.0) float[3,4]~[0 -1 -Inf 2 NaN 0 1 2 -Inf -Inf -Inf -Inf]",
		"Multinomial-7(seed=3.0) double[4,1]", "Multinomial-22(sample_size=0, seed=3.0) T[2,3]",
	},
	"Bernoulli": {
		"Bernoulli-22(seed=9.0) T[2,8]~[0 0.1 0.25 0.5 0.75 0.9 1 0.3 0.6 0.05 0.95 0.4 0.45 0.55 0.2 0.8]",
		"Bernoulli-22(dtype=6, seed=11.0) T[40]~unit", "Bernoulli-15(dtype=9, seed=10.0) float[3,11]~unit",
		"Bernoulli-15(dtype=2) double[0,4]",
	},
}
