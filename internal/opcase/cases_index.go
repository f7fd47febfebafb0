package opcase

// Cases of the index family (codegen/kernel/ops_index.go).
var indexCases = map[string][]string{
	// Index remaps, gathers and scatters.
	"Transpose": {"Transpose-13 T[2,3,17]", "Transpose-13(perm=[1 2 0]) T[4,5,17]", "Transpose-13(perm=[0 2 1]) T[3,1,9]"},
	"Slice": {
		"Slice-13 T[20,10,5], int64[2]=[0 1], int64[2]=[3 -1], int64[2]=[0 2]",
		"Slice-13 T[6,7], int64[2]=[-1 -100], int64[2]=[-100 100], int64[2]=[0 1], int64[2]=[-2 3]",
		"Slice-13 T[5], int64[1]=[-7], int64[1]=[-100], int64[1]=[0], int64[1]=[-1]",
		"Slice-13 T[5,4], int64[1]=[100], int64[1]=[-100], int64[1]=[-1], int64[1]=[-1]",
		"Slice-1(starts=[1 0], ends=[3 -1], axes=[1 0]) T[4,5]",
	},
	"Pad": {
		"Pad-13 T[3,5], int64[4]=[1 2 2 0]", "Pad-13(mode=\"edge\") T[3,5], int64[4]=[2 1 0 3]",
		"Pad-13(mode=\"reflect\") T[3,5], int64[4]=[2 3 2 4]", "Pad-19(mode=\"wrap\") T[3,5], int64[4]=[1 7 2 0]",
		"Pad-18 T[2,3,5], int64[2]=[1 -1], T~[5], int64[1]=[-1]", "Pad-2(pads=[0 1 1 0], value=2.5) float[3,3]",
	},
	"Concat":          {"Concat-13(axis=1) T[2,3,5], T[2,7,5], T[2,1,5]", "Concat-13(axis=-1) T[3,17], T[3,2]"},
	"Split":           {"Split-13(axis=1) T[2,7,5], int64[2]=[3 4] -> 2", "Split-18(axis=0, num_outputs=3) T[7,3] -> 3"},
	"Expand":          {"Expand-13 T[3,1], int64[3]=[2 3 17]"},
	"Tile":            {"Tile-13 T[2,3,5], int64[3]=[2 1 3]"},
	"DepthToSpace":    {"DepthToSpace-13(blocksize=2) T[1,8,3,2]", "DepthToSpace-13(blocksize=2, mode=\"CRD\") T[2,8,2,3]"},
	"SpaceToDepth":    {"SpaceToDepth-13(blocksize=2) T[1,3,4,6]"},
	"Trilu":           {"Trilu-14 T[2,4,5]", "Trilu-14(upper=0) T[5,4], int64~[-1]", "Trilu-14 T[4,4], int64=[2]"},
	"EyeLike":         {"EyeLike-9(k=1) T[4,5]", "EyeLike-9(dtype=1) T[3,3]"},
	"Range":           {"Range-11 T=[2], T=[17], T=[3]", "Range-11 T=[10], T=[1], T=[-2]"},
	"ConstantOfShape": {"ConstantOfShape-9 int64[3]=[2 3 4]"},
	"OneHot":          {"OneHot-11(axis=1) T[2,3]~[0 1 2 -1 -3 5], int64=[4], float[2]~[-1 3]", "OneHot-11 T[4]~[0 1 2 3], float=[4], int32[2]~[0 7]"},
	"Gather":          {"Gather-13(axis=1) T[3,5,2], int64[2,2]~idx(5)", "Gather-13 T[5,3], int32~[-2]"},
	"GatherElements":  {"GatherElements-13(axis=1) T[3,5], int64[3,4]~idx(5)", "GatherElements-13 T[4,3], int32[2,3]~idx(4)"},
	"GatherND":        {"GatherND-13 T[3,4,5], int64[2,2]~[0 1 -1 3]", "GatherND-13(batch_dims=1) T[2,3,4], int64[2,1]~[1 2]"},
	"ScatterElements": {"ScatterElements-16(axis=1, reduction=\"add\") T[3,5], int64[3,4]~idx(5), T[3,4]",
		"ScatterElements-13 T[4,3], int64[2,3]~[0 1 2 3 -1 -2], T[2,3]"},
	"ScatterND": {"ScatterND-16(reduction=\"mul\") T[4,3], int64[2,1]~[1 1], T[2,3]", "ScatterND-13 T[4,5,2], int64[2,2]~[0 1 3 -1], T[2,2]"},
	"Resize": {
		"Resize-13(mode=\"linear\") T[1,2,4,4], _, float[4]=[1 1 2 1.5]",
		"Resize-13(mode=\"cubic\") T[1,1,5,4], _, float[4]=[1 1 0.6 1.5]",
		"Resize-13(mode=\"nearest\", coordinate_transformation_mode=\"asymmetric\") T[1,2,3,4], _, _, int64[4]=[1 2 7 2]",
		"Resize-13(mode=\"linear\", coordinate_transformation_mode=\"align_corners\") T[2,3,4], _, _, int64[3]=[2 3 7]",
		"Resize-13(mode=\"linear\", coordinate_transformation_mode=\"tf_crop_and_resize\", extrapolation_value=9.0) T[1,1,4,4], float[8]=[0 0 0.4 0.6 1 1 1.2 1.7], _, int64[4]=[1 1 3 3]",
		"Resize-18(mode=\"cubic\", antialias=1) T[1,1,8,8], _, float[4]=[1 1 0.5 0.6]",
	},
}
