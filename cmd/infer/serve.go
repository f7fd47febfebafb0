package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/limitflags"
	"github.com/kiln-ml/kiln/internal/serve"
	"github.com/kiln-ml/kiln/runtime"
)

var serveCmd = &cli.Command{
	Name:    "serve",
	Summary: "serve a model repository over KServe's v2 inference protocol (HTTP/REST and gRPC)",
	Help: `--model-repository DIR is in Triton's layout: DIR/NAME/VERSION/model.kiln, VERSION a
positive integer; the newest version of each model is served, under NAME. A model that
fails to load (a corrupt engine, an arena that cannot be allocated, a folder or engine that
is a symbolic link out of DIR) is refused with its reason, logged and listed in
/v2/repository/index, while the others serve; the server does not start only when none
of DIR's models loads.

HTTP (--http): GET /v2/health/live, /v2/health/ready, /v2 (server metadata),
/v2/models/NAME[/versions/V] (model metadata), /v2/models/NAME[/versions/V]/ready;
POST /v2/models/NAME[/versions/V]/infer with JSON tensors or the binary tensor data
extension (Inference-Header-Content-Length); POST /v2/repository/index and
/v2/repository/models/NAME/load (reload the newest version from disk while requests run:
those in flight finish on the old engine, new ones go to the new; an engine that fails to
load is refused and the old one keeps serving) and .../unload.

gRPC (--grpc): the protocol's service inference.GRPCInferenceService (ServerLive,
ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelInfer); inputs as typed
contents or raw_input_contents, outputs as raw_output_contents; a bad request is answered
INVALID_ARGUMENT, a full queue UNAVAILABLE, a timeout DEADLINE_EXCEEDED.

Each model runs --instances contexts, each one inference at a time on --threads threads.
A request waits in the model's queue for an instance; a full queue (--max-queue, at most
65536) is answered 503 at once, a wait past --timeout 503 too. --timeout D (30s) also
bounds each connection, so that slow or idle clients cannot hold every file descriptor: a
request's header and body must arrive within D, its answer be written within 3D, and an
idle keep-alive connection is closed after D; a gRPC connection with no call is closed
after D, one older than 10D is asked to reconnect and closed 3D later. With --timeout 0
requests and answers are unbounded, but reading a request and idling keep a 30s bound.
A bad request (unknown model, input or output, wrong datatype or shape, malformed JSON,
lying binary_data_size, a body over --max-request-bytes) is answered 400 with a message
naming the problem. GET /metrics on the HTTP port gives
Prometheus metrics (requests and failures by model, latency, queue time, batch sizes).

--max-batch N batches requests for engines whose inputs and outputs lead with one dynamic
dim (cc build keeps a model's dynamic batch axis): an instance that takes a request waits up
to --max-queue-delay for more, runs up to N rows (and at most the engine's range) as one
inference and splits the outputs; other engines run one request at a time.
--capture DIR writes a --capture-rate fraction of the requests' inputs to
DIR/MODEL/INPUT/*.pb in the background (a bounded buffer: a sample that does not fit is
dropped and counted in /metrics, never waited for); cc quantize --calib DIR/MODEL/INPUT
reads them. In MODEL and INPUT, bytes other than A-Z a-z 0-9 . _ - (and a leading .) are
written %XX, so that each name has its own folder: input a/b is in a%2Fb, a_b in a_b.
SIGTERM or SIGINT shuts down gracefully:
readiness turns 503, the requests in flight finish, then the server exits with status 0.`,
	MaxArgs: 0,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		repo := fs.String("model-repository", "", "the model repository `DIR` (NAME/VERSION/model.kiln; required)")
		httpAddr := fs.String("http", ":8000", "serve HTTP/REST on `ADDR` (host:port)")
		grpcAddr := fs.String("grpc", ":8001", "serve gRPC (inference.GRPCInferenceService) on `ADDR` (empty: no gRPC)")
		threads := cli.NonNegativeInt(fs, "threads", 0, threadsUsage)
		instances := cli.PositiveInt(fs, "instances", 1, fmt.Sprintf("`K` contexts per model, each running one inference at a time (1 to %d)", serve.MaxInstances))
		maxQueue := cli.PositiveInt(fs, "max-queue", 64, fmt.Sprintf("at most `N` requests wait per model (1 to %d); more are answered 503", serve.MaxQueueLimit))
		timeout := fs.Duration("timeout", serve.DefaultTimeout, "answer 503 to a request not done after `D` (0: no limit); also a connection's read, write (3D) and idle timeouts")
		maxBody := int64(64 << 20)
		fs.Func("max-request-bytes", "the largest HTTP request body, in `bytes` (K, M, G suffixes; default 64M)", func(s string) error {
			n, err := limitflags.ParseBytes(s)
			maxBody = n
			return err
		})
		maxBatch := cli.PositiveInt(fs, "max-batch", 1, "batch up to `N` rows of requests into one inference, for engines with a dynamic batch dim (1: no batching)")
		delay := fs.Duration("max-queue-delay", 0, "with --max-batch, wait up to `D` for a batch to fill (0: batch what is already queued)")
		capture := fs.String("capture", "", "write a sample of the requests' inputs to `DIR`/MODEL/INPUT/*.pb, calibration data for cc quantize --calib")
		captureRate := cli.NonNegativeFloat(fs, "capture-rate", 0.01, "with --capture, the fraction `R` (0 to 1) of requests sampled")
		requireSigned := requireSignedFlag(fs)
		limits := limitflags.Add(fs, limitflags.Tensor, limitflags.Arena)
		return func(env *cli.Env, args []string) error {
			if *repo == "" {
				return cli.Usagef("--model-repository is required")
			}
			if *captureRate > 1 {
				return cli.Usagef("--capture-rate %g: want a fraction from 0 to 1", *captureRate)
			}
			if *delay < 0 {
				return cli.Usagef("--max-queue-delay %v: want a duration of 0 or more", *delay)
			}
			if *maxQueue > serve.MaxQueueLimit {
				return cli.Usagef("--max-queue %d: want 1 to %d (each model allocates its queue up front)", *maxQueue, serve.MaxQueueLimit)
			}
			if *instances > serve.MaxInstances {
				return cli.Usagef("--instances %d: want 1 to %d (each instance is a context with its own arena)", *instances, serve.MaxInstances)
			}
			if *timeout < 0 {
				return cli.Usagef("--timeout %v: want a duration of 0 or more", *timeout)
			}
			cfg := serve.Config{
				Repository: *repo, Threads: env.ClampThreads("--threads", *threads), Instances: *instances,
				MaxQueue: *maxQueue, Timeout: *timeout, MaxRequestBytes: maxBody, Limits: limits.Limits(),
				MaxBatch: *maxBatch, MaxQueueDelay: *delay, CaptureDir: *capture, CaptureRate: *captureRate,
				// Copied weights, as serve's default Load has them.
				Load: func(path string) (*runtime.Engine, error) {
					return loadEngineWith(path, *requireSigned, runtime.LoadOptions{CopyWeights: true})
				},
				Log: env.Stderr,
			}
			// The CLI's own handler exits at once on SIGINT and SIGTERM; a
			// server finishes its requests first, so it takes the signals over.
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ln, err := net.Listen("tcp", *httpAddr)
			if err != nil {
				return fmt.Errorf("--http: %w", err)
			}
			ls := serve.Listeners{HTTP: ln}
			if *grpcAddr != "" {
				if ls.GRPC, err = net.Listen("tcp", *grpcAddr); err != nil {
					ln.Close()
					return fmt.Errorf("--grpc: %w", err)
				}
			}
			s, err := serve.New(cfg)
			if err != nil {
				ln.Close()
				if ls.GRPC != nil {
					ls.GRPC.Close()
				}
				return err
			}
			fmt.Fprintf(env.Stderr, "infer serve: HTTP on %s\n", ln.Addr())
			if ls.GRPC != nil {
				fmt.Fprintf(env.Stderr, "infer serve: gRPC on %s\n", ls.GRPC.Addr())
			}
			return s.Run(ctx, ls)
		}
	},
}
