package main

import (
	"flag"

	"github.com/kiln-ml/kiln/internal/cli"
)

var convertCmd = &cli.Command{
	Name:    "convert",
	Args:    "IN OUT",
	Summary: "convert a model between ONNX protobuf (.onnx) and text syntax (.onnxtxt)",
	Help: `The formats are chosen by the files' extensions; converting to the same format
rewrites the model. Text output writes initializers of over 64 elements
to one binary file beside OUT, so a large model's text stays readable.`,
	MinArgs: 2,
	MaxArgs: 2,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		return func(env *cli.Env, args []string) error {
			in, out := args[0], args[1]
			if err := checkExt(in); err != nil {
				return err
			}
			if err := checkExt(out); err != nil {
				return err
			}
			m, err := readModel(in)
			if err != nil {
				return err
			}
			return writeModel(out, m)
		}
	},
}
