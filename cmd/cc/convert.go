package main

import (
	"flag"

	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/limitflags"
)

var convertCmd = &cli.Command{
	Name:    "convert",
	Args:    "IN OUT",
	Summary: "convert a model between ONNX protobuf (.onnx) and text syntax (.onnxtxt)",
	Help: `The formats are chosen by the files' extensions; converting to the same format
rewrites the model into OUT. Text output writes initializers of over 64 elements
to one binary file beside OUT (OUT.bin), so a large model's text stays readable.
OUT (and OUT.bin) must not be IN or one of its external data files; both are
written atomically, so a failed conversion leaves an existing OUT as it was.`,
	MinArgs: 2,
	MaxArgs: 2,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
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
			return writeModel(out, m)
		}
	},
}
