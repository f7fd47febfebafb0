package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/limitflags"
	"github.com/kiln-ml/kiln/internal/training"
)

var gradCmd = &cli.Command{
	Name:    "grad",
	Args:    "MODEL",
	Summary: "write a model's training graph: its loss and each parameter's gradient, as a standard ONNX model",
	Help: `Appends a loss to the model's first output and the gradient of the loss with respect
to every float initializer it depends on (passes/autodiff: one rule per op, gradients in
standard ONNX ops), and writes the result as an ONNX model (viewable in Netron, runnable
in ONNX Runtime): its inputs are the model's and the label (--label), its outputs the
scalar loss and grad.<param> for each parameter, in initializer order. BatchNormalization's
running statistics get no gradient.

--loss softmax-cross-entropy takes the first output as class scores [N, C, ...] and the
label as int64 class indices [N, ...] (SoftmaxCrossEntropyLoss, mean reduction); --loss
mse takes a label of the output's shape and averages the squared differences. --batch B
sets the leading dim of every input (an inference model's batch is usually 1).`,
	MinArgs: 1,
	MaxArgs: 1,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		out := fs.String("o", "", "output model, .onnx or .onnxtxt (default: MODEL.train.onnx)")
		loss := fs.String("loss", training.SoftmaxCrossEntropy, "the loss: "+strings.Join(training.Losses, " or "))
		label := fs.String("label", "label", "`NAME` of the label input the loss compares the output with")
		batch := cli.NonNegativeInt(fs, "batch", 0, "`B`: the leading dim of every input (0: the model's)")
		limits := limitflags.Add(fs, limitflags.Tensor, limitflags.File, limitflags.Nesting)
		return func(env *cli.Env, args []string) error {
			model := args[0]
			if err := checkExt(model); err != nil {
				return err
			}
			path := *out
			if path == "" {
				path = strings.TrimSuffix(model, filepath.Ext(model)) + ".train" + extONNX
			}
			if err := checkExt(path); err != nil {
				return err
			}
			if *loss != training.SoftmaxCrossEntropy && *loss != training.MSE {
				return cli.Usagef("--loss must be %s, not %q", strings.Join(training.Losses, " or "), *loss)
			}
			outputs := modelOutputs(path)
			m, inputs, err := readModelSources(model, limits.Limits())
			if err != nil {
				return err
			}
			if err := cli.CheckOutputs(inputs, outputs); err != nil {
				return err
			}
			g, err := training.Grad(m, training.GradOptions{Loss: *loss, Label: *label, Batch: int64(*batch)})
			if err != nil {
				return cli.FileError(model, err)
			}
			if err := writeModel(path, g.Model); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "wrote %s: loss %s over %q, %d parameters (%s values), %d nodes\n", path, *loss,
				g.Output.Name, len(g.Params), commas(paramCount(g)), len(g.Model.Graph.Nodes))
			return nil
		}
	},
}

func paramCount(g *training.Graph) int64 {
	var n int64
	for _, p := range g.Params {
		n += p.Value.Type.Shape.NumElements()
	}
	return n
}
