// Command cc is kiln's compiler CLI: it inspects and converts models and
// runs the ONNX conformance tests on an executor; `cc build` (models to
// engine files) comes with the compiler.
//
// It is built as bin/cc and must not be installed on PATH, where it would
// shadow the system C compiler.
package main

import "github.com/kiln-ml/kiln/internal/cli"

var tool = &cli.Tool{
	Name:    "cc",
	Summary: "kiln's model compiler: inspect, convert and test ONNX models",
	Commands: []*cli.Command{
		inspectCmd,
		convertCmd,
		testCmd,
	},
	Coming: []cli.Coming{
		{Name: "build", Summary: "compile a model into an engine file for a CPU or GPU target"},
		{Name: "passes", Summary: "list the optimization pipelines and run passes with --dump-after"},
	},
	Footer: "Models are .onnx (ONNX protobuf) or .onnxtxt (ONNX text syntax), chosen by extension.\n" +
		"bin/cc is not the C compiler: do not put it on PATH.",
}

func main() { cli.Run(tool) }
