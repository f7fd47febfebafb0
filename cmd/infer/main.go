// Command infer is kiln's runtime CLI: it loads engine files that `cc build`
// writes and runs, checks and benchmarks them. It never needs LLVM or the
// model frontends, and builds with CGO_ENABLED=0.
//
// The engine format and its executors are not built yet; until they are,
// infer only describes what is coming.
package main

import "github.com/kiln-ml/kiln/internal/cli"

var tool = &cli.Tool{
	Name:    "infer",
	Summary: "kiln's runtime: run, check and benchmark compiled engine files",
	Coming: []cli.Coming{
		{Name: "run", Summary: "run an engine on input tensors (.pb files) and write its outputs"},
		{Name: "check", Summary: "verify an engine file (header, checksums, target, CPU features) and print its metadata"},
		{Name: "bench", Summary: "measure an engine's latency and throughput"},
	},
	Footer: "Engines (.kiln files) are built by 'cc build', which comes with the compiler.\n" +
		"Until then, 'cc inspect', 'cc convert' and 'cc test' work on ONNX models.",
}

func main() { cli.Run(tool) }
