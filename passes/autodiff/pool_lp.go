package autodiff

// LpPool (ir/ops pool_lp.go) has no rule yet.

func init() {
	notDifferentiable("", "not implemented: its gradient spreads dy * (|x|/y)^(p-1) * sign(x) over each window", "LpPool")
}
