// Command cc is kiln's compiler CLI: it inspects and converts models and
// runs the ONNX conformance tests on an executor, and compiles models into
// engine files (`cc build`).
//
// It is built as bin/cc and must not be installed on PATH, where it would
// shadow the system C compiler.
package main

import "github.com/kiln-ml/kiln/internal/cli"

var tool = &cli.Tool{
	Name:    "cc",
	Summary: "kiln's model compiler: inspect, convert, test and build ONNX models",
	Commands: []*cli.Command{
		inspectCmd,
		convertCmd,
		testCmd,
		quantizeCmd,
		buildCmd,
		gradCmd,
		passesCmd,
		keygenCmd,
	},
	Footer: "Models are .onnx (ONNX protobuf) or .onnxtxt (ONNX text syntax), chosen by extension.\n" +
		"bin/cc is not the C compiler: do not put it on PATH.",
}

func main() { cli.Run(tool) }
