package opcase

// Cases of the view ops (codegen/cpu/ops_shape.go): graph outputs of
// graph inputs, so that they copy.
var shapeCases = map[string][]string{
	"Reshape":   {"Reshape-14 T[2,3,4], int64[2]=[6 -1]", "Reshape-14 T[5], int64[2]=[1 5]"},
	"Flatten":   {"Flatten-13(axis=2) T[2,3,4,5]"},
	"Squeeze":   {"Squeeze-13 T[3,1,5], int64[1]=[1]"},
	"Unsqueeze": {"Unsqueeze-13 T[3,5], int64[2]=[0 -1]"},
	"Identity":  {"Identity-16 T[3,17]"},
	// Shape and Size of a value whose dims are symbolic run (the static
	// ones fold); here they are static, which the evaluator reads alike.
	"Shape": {"Shape-13 T[2,3,4]", "Shape-15(start=1) T[2,3,4,5]", "Shape-15(start=-3, end=-1) T[2,3,4,5]", "Shape-15(start=2, end=1) T[2,3,4]"},
	"Size":  {"Size-13 T[2,3,4]", "Size-13 T[5]"},
	"Dropout": {"Dropout-13 T[3,17]", "Dropout-13 T[4], T=[0.5], bool=[0]",
		"Dropout-13(seed=3) T[4,17], float~[0.75], bool~[1] -> 2", "Dropout-13 T[2,9], float~[0.3], bool~[0] -> 2",
		"Dropout-10(ratio=0.4) T[3,5] -> 2"},
}
