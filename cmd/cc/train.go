package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/training"
	"github.com/kiln-ml/kiln/ir"
)

// trainFlags are cc build's --train flags.
type trainFlags struct {
	train            *bool
	loss, label, opt *string
	lr               *float64
	batch            *int
	reinit           *bool
	seed             *int
}

func addTrainFlags(fs *flag.FlagSet) *trainFlags {
	return &trainFlags{
		train:  fs.Bool("train", false, "compile a training step instead of inference: forward, loss, gradients and the optimizer's update (see infer train)"),
		loss:   fs.String("loss", training.SoftmaxCrossEntropy, "with --train: the loss, "+strings.Join(training.Losses, " or ")),
		label:  fs.String("label", "label", "with --train: `NAME` of the label input"),
		opt:    fs.String("optimizer", training.Adam, "with --train: "+strings.Join(training.Optimizers, ", ")+" (momentum 0.9; Adam's betas 0.9, 0.999)"),
		lr:     cli.PositiveFloat(fs, "lr", 1e-3, "with --train: the learning rate (infer train --lr overrides it)"),
		batch:  cli.PositiveInt(fs, "batch", 32, "with --train: the mini-batch size `B` the step is compiled for"),
		reinit: fs.Bool("reinit", false, "with --train: draw every weight anew (He/Kaiming normal for conv and linear weights, zero biases) instead of training on from the model's"),
		seed:   cli.NonNegativeInt(fs, "seed", 1, "with --train --reinit: the seed of the new weights"),
	}
}

// apply turns m into its training step when --train is given; the other
// training flags without it are a usage error.
func (t *trainFlags) apply(fs *flag.FlagSet, m *ir.Model, opts *build.Options) error {
	if !*t.train {
		var set []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "loss", "label", "optimizer", "lr", "batch", "reinit", "seed":
				set = append(set, "--"+f.Name)
			}
		})
		if len(set) > 0 {
			return cli.Usagef("%s only apply with --train", strings.Join(set, ", "))
		}
		return nil
	}
	if opts.Precision == "int8" {
		return cli.Usagef("--train compiles a float training step: --precision int8 does not apply")
	}
	if *t.loss != training.SoftmaxCrossEntropy && *t.loss != training.MSE {
		return cli.Usagef("--loss must be %s, not %q", strings.Join(training.Losses, " or "), *t.loss)
	}
	switch *t.opt {
	case training.SGD, training.Momentum, training.Adam:
	default:
		return cli.Usagef("--optimizer must be %s, not %q", strings.Join(training.Optimizers, ", "), *t.opt)
	}
	if *t.reinit {
		if err := training.Reinit(m, int64(*t.seed)); err != nil {
			return err
		}
	}
	step, tr, err := training.Step(m, training.StepOptions{
		GradOptions: training.GradOptions{Loss: *t.loss, Label: *t.label, Batch: int64(*t.batch)},
		Optimizer:   *t.opt, LR: *t.lr})
	if err != nil {
		return err
	}
	*m = *step
	// The same parameters at inference, for evaluation and serving.
	inf, err := training.Inference(tr)
	if err != nil {
		return err
	}
	iopts := *opts
	iopts.DumpAfter, iopts.Training = nil, nil
	res, err := build.BuildModel(inf, tr.Model, iopts)
	if err != nil {
		return fmt.Errorf("the inference engine: %w", err)
	}
	tr.Inference = res.Engine
	opts.Training = tr
	opts.Train = []string{"--train", "--loss=" + *t.loss, "--label=" + *t.label, "--optimizer=" + *t.opt,
		fmt.Sprintf("--lr=%g", *t.lr), fmt.Sprintf("--batch=%d", *t.batch)}
	if *t.reinit {
		opts.Train = append(opts.Train, "--reinit", fmt.Sprintf("--seed=%d", *t.seed))
	}
	return nil
}
