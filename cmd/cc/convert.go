package main

import (
	"flag"
	"fmt"

	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/limitflags"
	"github.com/kiln-ml/kiln/ir/version"
)

var convertCmd = &cli.Command{
	Name:    "convert",
	Args:    "IN OUT",
	Summary: "convert a model between ONNX protobuf (.onnx) and text syntax (.onnxtxt), or to another opset",
	Help: `The formats are chosen by the files' extensions; converting to the same format
rewrites the model into OUT. Text output writes initializers of over 64 elements
to one binary file beside OUT (OUT.bin), so a large model's text stays readable.
OUT (and OUT.bin) must not be IN or one of its external data files; both are
written atomically, so a failed conversion leaves an existing OUT as it was.

--opset N also converts the model's ONNX (default-domain) nodes to their form
at opset N, as ONNX's version converter does: from opset 7 up to the newest
kiln implements, Upsample becomes Resize, attributes that became inputs
(Slice, Split, Squeeze, Unsqueeze, Pad, Clip, TopK, the Reduce ops' axes) become
inputs, and Softmax's old flattening, BatchNormalization's, GroupNormalization's,
GridSample's, RoiAlign's and DFT's changes are spelled out. A node whose old
meaning has no form at N is refused, naming it. To an older opset only ops
that did not change between the two convert.`,
	MinArgs: 2,
	MaxArgs: 2,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		opset := cli.NonNegativeInt(fs, "opset", 0, "convert the model's ONNX nodes to opset `N` (0: keep its opset)")
		limits := limitflags.Add(fs, limitflags.Tensor, limitflags.File, limitflags.Nesting)
		return func(env *cli.Env, args []string) error {
			in, out := args[0], args[1]
			if err := checkExt(in); err != nil {
				return err
			}
			if err := checkExt(out); err != nil {
				return err
			}
			outputs := modelOutputs(out)
			if err := cli.CheckOutputs(modelFiles(in, nil), outputs); err != nil {
				return err
			}
			m, inputs, err := readModelSources(in, limits.Limits())
			if err != nil {
				return err
			}
			if err := cli.CheckOutputs(inputs, outputs); err != nil {
				return err
			}
			if *opset > 0 {
				if err := version.Convert(m, int64(*opset), version.Reason{}); err != nil {
					return fmt.Errorf("%s: %w", in, err)
				}
			}
			return writeModel(out, m)
		}
	},
}
