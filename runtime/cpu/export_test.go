package cpu

// For the external tests (derive_native_test.go), which compile engines
// with codegen/cpu and so cannot be in this package.
var (
	ExpandOracle = expandOracle
	WinogradRef  = winograd
)
