package autodiff

// The random ops (ir/ops random.go).

func init() {
	notDifferentiable("", "a random draw: its outputs do not depend on its inputs' values differentiably (Bernoulli's and Multinomial's are discrete)",
		"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli", "Multinomial")
}
