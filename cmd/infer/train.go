package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/atomicfile"
	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/limitflags"
	"github.com/kiln-ml/kiln/internal/trainer"
)

// dataList is a repeatable --data flag: one path, or NAME=PATH per input.
type dataList []string

func (d *dataList) String() string { return strings.Join(*d, ",") }

func (d *dataList) Set(s string) error {
	*d = append(*d, s)
	return nil
}

var trainCmd = &cli.Command{
	Name:    "train",
	Args:    "ENGINE",
	Summary: "train with a training-step engine (cc build --train) on a data set; export the trained model",
	Help: `Runs the engine's training step over --epochs passes of the data in mini-batches of
the engine's batch size. Each epoch takes the samples in a new order (seeded by --seed)
and drops the last samples that do not fill a batch; a background worker shuffles and
assembles the next batches while the engine computes the current step. The engine's
parameters and optimizer state live in two sets of buffers that each step reads from
and writes to in turn (nothing is copied); the parameters start from the model the
engine was built from (cc build --reinit draws them anew).

--data and --eval-data take the forms infer compare's --data does: a tensor file (.pb
or .npy) whose leading dim counts samples, a folder of them, or NAME=FILE per input.
--labels are class indices (an integer file, one per sample) for a softmax-cross-entropy
engine, targets of the output's shape for an mse one. With --eval-data and
--eval-labels each epoch ends with the accuracy on them (through the engine's inference
engine: the forward pass alone). A progress bar with the loss and accuracy runs on
stderr when it is a terminal; one line per epoch goes to stdout, or with --json one
object at the end: {"epochs": [{"epoch", "loss", "accuracy", "eval_accuracy",
"seconds"}], "final": {"loss", "eval_accuracy", "seconds"}} (eval_accuracy null without
eval data; seconds since the start). --export writes the trained inference model as
ONNX (atomically). --publish-every K hands the parameters to a serving context every K
steps (see docs/cli.md, Training).`,
	MinArgs: 1,
	MaxArgs: 1,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		var data, evalData dataList
		fs.Var(&data, "data", "the training samples: FILE or DIR, or NAME=FILE per input (repeat)")
		labels := fs.String("labels", "", "the training labels (FILE)")
		fs.Var(&evalData, "eval-data", "samples to measure accuracy on after each epoch (as --data)")
		evalLabels := fs.String("eval-labels", "", "the evaluation labels (FILE)")
		epochs := cli.PositiveInt(fs, "epochs", 10, "passes over the data `N`")
		lr := cli.NonNegativeFloat(fs, "lr", 0, "learning rate (0: the one the engine was built with, cc build --lr)")
		seed := cli.NonNegativeInt(fs, "seed", 1, "seed of the batches' order")
		export := fs.String("export", "", "write the trained inference model to this .onnx `FILE`")
		asJSON := fs.Bool("json", false, "print one JSON object at the end instead of a line per epoch")
		threads := cli.NonNegativeInt(fs, "threads", 1, threadsUsage)
		publish := cli.NonNegativeInt(fs, "publish-every", 0, "hand the parameters to a serving context every `K` steps, benchmarked by another goroutine as training runs (0: none)")
		requireSigned := requireSignedFlag(fs)
		limits := limitflags.Add(fs, limitflags.Tensor, limitflags.Arena)
		return func(env *cli.Env, args []string) error {
			start := time.Now()
			if len(data) == 0 || *labels == "" {
				return cli.Usagef("--data and --labels are required")
			}
			if (len(evalData) == 0) != (*evalLabels == "") {
				return cli.Usagef("--eval-data and --eval-labels go together")
			}
			if *export != "" && !strings.HasSuffix(*export, ".onnx") {
				return cli.Usagef("--export writes ONNX: give a .onnx file, not %q", *export)
			}
			inputs := []cli.File{{Path: args[0], Role: "the engine"}, {Path: *labels, Role: "--labels"}}
			for _, d := range append(append([]string{}, data...), evalData...) {
				if _, path, ok := strings.Cut(d, "="); ok {
					d = path
				}
				inputs = append(inputs, cli.File{Path: d, Role: "the data"})
			}
			if *export != "" {
				if err := cli.CheckOutputs(inputs, []cli.File{{Path: *export, Role: "--export"}}); err != nil {
					return err
				}
			}
			eng, err := loadEngine(args[0], *requireSigned)
			if err != nil {
				return err
			}
			t, err := trainer.New(eng, env.ClampThreads("--threads", *threads), *lr)
			if err != nil {
				return cli.FileError(args[0], err)
			}
			rec := t.Record()
			train, err := trainer.Load(rec, eng.Inputs(), data, *labels, limits.Limits())
			if err != nil {
				return err
			}
			// The compiled step clamps what it indexes: a label outside
			// the classes would train silently wrong.
			if err := train.CheckClasses(t.Classes()); err != nil {
				return cli.FileError(*labels, err)
			}
			batch := int(rec.Batch)
			if train.PerEpoch(batch) == 0 {
				return fmt.Errorf("%d samples do not fill one batch of %d (the engine's batch, cc build --batch)", train.N, batch)
			}
			var eval *trainer.Samples
			var ev *trainer.Evaluator
			if len(evalData) > 0 || *publish > 0 {
				inf, err := t.Inference()
				if err != nil {
					return cli.FileError(args[0], err)
				}
				if ev, err = trainer.NewEvaluator(inf, rec.Output, 1); err != nil {
					return err
				}
				if len(evalData) > 0 {
					if eval, err = trainer.Load(rec, eng.Inputs(), evalData, *evalLabels, limits.Limits()); err != nil {
						return err
					}
					if err := eval.CheckClasses(t.Classes()); err != nil {
						return cli.FileError(*evalLabels, err)
					}
				}
				var srv *trainer.Server
				if *publish > 0 {
					if srv, err = trainer.NewServer(inf, train, t.CurrentParams(), batch); err != nil {
						return err
					}
					defer func() {
						st := srv.Stop()
						fmt.Fprintf(env.Stderr, "serving while training: %d inferences, %d errors, p50 %.3f ms, p99 %.3f ms; %d publishes, each at most %s\n",
							st.Runs, st.Errors, st.P50.Seconds()*1e3, st.P99.Seconds()*1e3, st.Publishes, st.MaxPublish)
					}()
					t.OnStep = func(step int64) {
						if step%int64(*publish) == 0 {
							srv.Publish(t.Params()) // a failure counts among the errors
						}
					}
				}
			}
			report := &trainReport{}
			bar := newTrainBar(env.Stdout, env.Stderr, *epochs*train.PerEpoch(batch))
			loader := train.Shuffled(batch, *epochs, 2, int64(*seed))
			defer loader.Close()
			var sum float64
			var right, seen int
			for {
				b, ok := loader.Next()
				if !ok {
					break
				}
				r, err := t.Step(b)
				loader.Done(b)
				if err != nil {
					bar.abort()
					return err
				}
				sum += r.Loss
				right += r.Correct
				seen += batch
				steps := seen / batch
				bar.step(b.Epoch, *epochs, sum/float64(steps), float64(right)/float64(seen), rec.LossKind)
				if b.Index == train.PerEpoch(batch)-1 {
					e := epochReport{Epoch: b.Epoch, Loss: sum / float64(steps), Accuracy: float64(right) / float64(seen)}
					if eval != nil {
						acc, err := ev.Accuracy(t.CurrentParams(), eval, batch)
						if err != nil {
							bar.abort()
							return err
						}
						e.EvalAccuracy = &acc
					}
					e.Seconds = time.Since(start).Seconds()
					report.Epochs = append(report.Epochs, e)
					if !*asJSON {
						bar.println(e.line(*epochs, rec.LossKind))
					}
					sum, right, seen = 0, 0, 0
				}
			}
			bar.wait()
			last := report.Epochs[len(report.Epochs)-1]
			report.Final = finalReport{Loss: last.Loss, EvalAccuracy: last.EvalAccuracy}
			if *export != "" {
				m, err := t.Model()
				if err != nil {
					return err
				}
				buf, err := onnx.Write(m)
				if err != nil {
					return err
				}
				if err := atomicfile.WriteFile(*export, buf, 0o644); err != nil {
					return cli.FileError(*export, err)
				}
			}
			report.Final.Seconds = time.Since(start).Seconds()
			if *asJSON {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(report)
			}
			line := fmt.Sprintf("trained %d epochs, %d steps of %d samples, in %.2f s: loss %.4f", len(report.Epochs), t.Steps(), batch, report.Final.Seconds, report.Final.Loss)
			if report.Final.EvalAccuracy != nil {
				line += fmt.Sprintf(", eval accuracy %.4f", *report.Final.EvalAccuracy)
			}
			if *export != "" {
				line += "; wrote " + *export
			}
			fmt.Fprintln(env.Stdout, line)
			return nil
		}
	},
}

type epochReport struct {
	Epoch        int      `json:"epoch"`
	Loss         float64  `json:"loss"`
	Accuracy     float64  `json:"accuracy"`
	EvalAccuracy *float64 `json:"eval_accuracy"`
	Seconds      float64  `json:"seconds"`
}

type finalReport struct {
	Loss         float64  `json:"loss"`
	EvalAccuracy *float64 `json:"eval_accuracy"`
	Seconds      float64  `json:"seconds"`
}

type trainReport struct {
	Epochs []epochReport `json:"epochs"`
	Final  finalReport   `json:"final"`
}

func (e epochReport) line(epochs int, kind string) string {
	s := fmt.Sprintf("epoch %*d/%d  loss %.4f", len(fmt.Sprint(epochs)), e.Epoch, epochs, e.Loss)
	if kind == "softmax-cross-entropy" {
		s += fmt.Sprintf("  accuracy %.4f", e.Accuracy)
	}
	if e.EvalAccuracy != nil {
		s += fmt.Sprintf("  eval accuracy %.4f", *e.EvalAccuracy)
	}
	return s + fmt.Sprintf("  %.2f s", e.Seconds)
}

// trainBar is the progress bar on stderr, or nothing when stderr is not a
// terminal (then epoch lines go straight to stdout).
type trainBar struct {
	p      *mpb.Progress
	bar    *mpb.Bar
	status atomic.Pointer[string] // written by the loop, read by the bar's goroutine
	out    io.Writer
}

func newTrainBar(stdout, stderr io.Writer, total int) *trainBar {
	tb := &trainBar{out: stdout}
	empty := ""
	tb.status.Store(&empty)
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return tb
	}
	tb.p = mpb.New(mpb.WithOutput(f), mpb.WithWidth(30))
	tb.bar = tb.p.AddBar(int64(total),
		mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return *tb.status.Load() })),
		mpb.AppendDecorators(decor.CountersNoUnit("%d/%d steps "), decor.Elapsed(decor.ET_STYLE_GO)))
	return tb
}

// step advances the bar and its status: the epoch's running loss and
// accuracy.
func (tb *trainBar) step(epoch, epochs int, loss, acc float64, kind string) {
	if tb.bar == nil {
		return
	}
	s := fmt.Sprintf("epoch %d/%d loss %.4f ", epoch, epochs, loss)
	if kind == "softmax-cross-entropy" {
		s += fmt.Sprintf("acc %.4f ", acc)
	}
	tb.status.Store(&s)
	tb.bar.Increment()
}

// println writes an epoch's line to stdout (the bar draws on stderr).
func (tb *trainBar) println(s string) { fmt.Fprintln(tb.out, s) }

func (tb *trainBar) abort() {
	if tb.bar != nil && !tb.bar.Completed() {
		tb.bar.Abort(false)
	}
	if tb.p != nil {
		tb.p.Wait()
	}
}

func (tb *trainBar) wait() {
	if tb.p != nil {
		tb.p.Wait()
	}
}
