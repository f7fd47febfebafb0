package serve

import (
	"context"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/kiln-ml/kiln/internal/serve/inferencepb"
	"github.com/kiln-ml/kiln/ir"
)

// GRPCServer returns a gRPC server with the protocol's service,
// inference.GRPCInferenceService, registered.
func (s *Server) GRPCServer() *grpc.Server {
	ct := connTimeoutsFor(s.cfg.Timeout)
	g := grpc.NewServer(grpc.MaxRecvMsgSize(int(min(s.cfg.MaxRequestBytes, math.MaxInt32))),
		grpc.ConnectionTimeout(ct.Read),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: ct.Idle, MaxConnectionAge: ct.Age, MaxConnectionAgeGrace: ct.Write,
			// A peer that vanished is found by a ping unanswered within Read.
			Time: ct.Idle, Timeout: ct.Read,
		}))
	inferencepb.RegisterGRPCInferenceServiceServer(g, &grpcService{s: s})
	return g
}

type grpcService struct {
	inferencepb.UnimplementedGRPCInferenceServiceServer
	s *Server
}

// grpcError turns a request's error into a status with the code its kind
// maps to.
func grpcError(err error) error {
	code := codes.Internal
	switch kindOf(err) {
	case BadRequest:
		code = codes.InvalidArgument
	case Unavailable:
		code = codes.Unavailable
	case Timeout:
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}

func (g *grpcService) ServerLive(context.Context, *inferencepb.ServerLiveRequest) (*inferencepb.ServerLiveResponse, error) {
	return &inferencepb.ServerLiveResponse{Live: true}, nil
}

func (g *grpcService) ServerReady(context.Context, *inferencepb.ServerReadyRequest) (*inferencepb.ServerReadyResponse, error) {
	return &inferencepb.ServerReadyResponse{Ready: g.s.Ready()}, nil
}

// ModelReady answers false, not an error, for a model that is not loaded,
// as clients' is_model_ready expects.
func (g *grpcService) ModelReady(_ context.Context, req *inferencepb.ModelReadyRequest) (*inferencepb.ModelReadyResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "ModelReady: the request names no model")
	}
	return &inferencepb.ModelReadyResponse{Ready: g.s.ModelReady(req.GetName(), req.GetVersion()) == nil}, nil
}

func (g *grpcService) ServerMetadata(context.Context, *inferencepb.ServerMetadataRequest) (*inferencepb.ServerMetadataResponse, error) {
	return &inferencepb.ServerMetadataResponse{Name: Name, Version: Version, Extensions: Extensions}, nil
}

func (g *grpcService) ModelMetadata(_ context.Context, req *inferencepb.ModelMetadataRequest) (*inferencepb.ModelMetadataResponse, error) {
	info, err := g.s.Model(req.GetName(), req.GetVersion())
	if err != nil {
		return nil, grpcError(err)
	}
	resp := &inferencepb.ModelMetadataResponse{Name: info.Name, Versions: info.Versions, Platform: Platform}
	for _, b := range info.Inputs {
		resp.Inputs = append(resp.Inputs, &inferencepb.ModelMetadataResponse_TensorMetadata{Name: b.Name, Datatype: datatypeName(b.DType), Shape: metadataShape(b)})
	}
	for _, b := range info.Outputs {
		resp.Outputs = append(resp.Outputs, &inferencepb.ModelMetadataResponse_TensorMetadata{Name: b.Name, Datatype: datatypeName(b.DType), Shape: metadataShape(b)})
	}
	return resp, nil
}

// ModelInfer takes inputs as raw_input_contents (one per input, in order)
// or as typed contents, and answers with raw_output_contents, as Triton
// does.
func (g *grpcService) ModelInfer(ctx context.Context, req *inferencepb.ModelInferRequest) (*inferencepb.ModelInferResponse, error) {
	start := time.Now()
	resp, err := g.modelInfer(ctx, req)
	g.s.observe(req.GetModelName(), "grpc", start, err)
	if err != nil {
		return nil, grpcError(err)
	}
	return resp, nil
}

func (g *grpcService) modelInfer(ctx context.Context, req *inferencepb.ModelInferRequest) (_ *inferencepb.ModelInferResponse, err error) {
	defer recovered(&err) // grpc-go does not recover a handler's panic: it would end the process
	r := &Request{Model: req.GetModelName(), Version: req.GetModelVersion(), ID: req.GetId()}
	raw := req.GetRawInputContents()
	if len(raw) > 0 && len(raw) != len(req.GetInputs()) {
		return nil, badRequest("raw_input_contents holds %d tensors for %d inputs", len(raw), len(req.GetInputs()))
	}
	if len(req.GetInputs()) == 0 {
		return nil, badRequest("the request has no inputs")
	}
	for i, in := range req.GetInputs() {
		if in.GetName() == "" {
			return nil, badRequest("input %d has no name", i)
		}
		input := Input{Name: in.GetName(), Datatype: in.GetDatatype(), Shape: in.GetShape()}
		if input.Shape == nil {
			input.Shape = []int64{}
		}
		if len(raw) > 0 {
			if in.GetContents() != nil {
				return nil, badRequest("input %q has contents and raw_input_contents; give one", in.GetName())
			}
			data := raw[i]
			input.Decode = func(d ir.DType, shape []int64) (*ir.Tensor, error) { return rawTensor(data, d, shape) }
		} else {
			contents := in.GetContents()
			input.Decode = func(d ir.DType, shape []int64) (*ir.Tensor, error) { return decodeContents(contents, d, shape) }
		}
		r.Inputs = append(r.Inputs, input)
	}
	for _, o := range req.GetOutputs() {
		r.Outputs = append(r.Outputs, o.GetName())
	}
	resp, err := g.s.Infer(ctx, r)
	if err != nil {
		return nil, err
	}
	out := &inferencepb.ModelInferResponse{ModelName: resp.Model, ModelVersion: resp.Version, Id: resp.ID}
	for _, t := range resp.Outputs {
		out.Outputs = append(out.Outputs, &inferencepb.ModelInferResponse_InferOutputTensor{Name: t.Name, Datatype: Datatype(t.DType), Shape: t.Dims})
		out.RawOutputContents = append(out.RawOutputContents, t.Raw)
	}
	return out, nil
}

// decodeContents reads a tensor from the typed field its datatype takes
// (FP16 and BF16 have none: they come as raw contents).
func decodeContents(c *inferencepb.InferTensorContents, d ir.DType, shape []int64) (*ir.Tensor, error) {
	n, err := elements(shape, d)
	if err != nil {
		return nil, err
	}
	var field string
	var count int
	switch d {
	case ir.Bool:
		field, count = "bool_contents", len(c.GetBoolContents())
	case ir.Int8, ir.Int16, ir.Int32:
		field, count = "int_contents", len(c.GetIntContents())
	case ir.Int64:
		field, count = "int64_contents", len(c.GetInt64Contents())
	case ir.Uint8, ir.Uint16, ir.Uint32:
		field, count = "uint_contents", len(c.GetUintContents())
	case ir.Uint64:
		field, count = "uint64_contents", len(c.GetUint64Contents())
	case ir.Float32:
		field, count = "fp32_contents", len(c.GetFp32Contents())
	case ir.Float64:
		field, count = "fp64_contents", len(c.GetFp64Contents())
	default:
		return nil, fmt.Errorf("datatype %s has no typed contents: send it as raw_input_contents", Datatype(d))
	}
	if int64(count) != n {
		if c == nil {
			return nil, fmt.Errorf("no data: neither contents nor raw_input_contents")
		}
		return nil, fmt.Errorf("%s holds %d elements, shape %v holds %d (datatype %s takes %s)", field, count, shape, n, Datatype(d), field)
	}
	t := ir.NewTensor(d, shape...)
	for i := range int(n) {
		switch d {
		case ir.Bool:
			if c.BoolContents[i] {
				t.Raw[i] = 1
			}
		case ir.Int8, ir.Int16, ir.Int32:
			v := int64(c.IntContents[i])
			if bits := d.Size() * 8; v < -1<<(bits-1) || v >= 1<<(bits-1) {
				return nil, fmt.Errorf("element %d: %d is out of range for %s", i, v, Datatype(d))
			}
			putUint(t, i, uint64(v))
		case ir.Int64:
			putUint(t, i, uint64(c.Int64Contents[i]))
		case ir.Uint8, ir.Uint16, ir.Uint32:
			v := uint64(c.UintContents[i])
			if v >= 1<<(d.Size()*8) {
				return nil, fmt.Errorf("element %d: %d is out of range for %s", i, v, Datatype(d))
			}
			putUint(t, i, v)
		case ir.Uint64:
			putUint(t, i, c.Uint64Contents[i])
		case ir.Float32:
			putFloat(t, i, float64(c.Fp32Contents[i]))
		case ir.Float64:
			putFloat(t, i, c.Fp64Contents[i])
		}
	}
	return t, nil
}
