package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/kiln-ml/kiln/ir"
)

// HeaderLength is the binary tensor data extension's header: the length
// of the JSON part of a body whose tensors' bytes follow it.
const HeaderLength = "Inference-Header-Content-Length"

// Extensions are the protocol extensions the server implements, as server
// metadata lists them.
var Extensions = []string{"binary_tensor_data", "model_repository"}

// Handler serves the HTTP/REST protocol.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/health/live", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /v2/health/ready", func(w http.ResponseWriter, r *http.Request) {
		if !s.Ready() {
			writeError(w, &Error{Kind: Unavailable, Msg: "the server is shutting down"})
		}
	})
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("GET /v2", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"name": Name, "version": Version, "extensions": Extensions})
	})
	for _, prefix := range []string{"/v2/models/{name}", "/v2/models/{name}/versions/{version}"} {
		mux.HandleFunc("GET "+prefix, s.httpMetadata)
		mux.HandleFunc("GET "+prefix+"/ready", func(w http.ResponseWriter, r *http.Request) {
			if err := s.ModelReady(r.PathValue("name"), r.PathValue("version")); err != nil {
				writeError(w, err)
			}
		})
		mux.HandleFunc("POST "+prefix+"/infer", s.httpInfer)
	}
	mux.HandleFunc("POST /v2/repository/index", func(w http.ResponseWriter, r *http.Request) {
		index, err := s.Index()
		if err != nil {
			writeError(w, &Error{Kind: Internal, Msg: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, index)
	})
	mux.HandleFunc("POST /v2/repository/models/{name}/load", func(w http.ResponseWriter, r *http.Request) {
		// A large engine may load for longer than the write timeout, which
		// is sized for inference; its answer must still reach the client.
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
		if err := s.Load(r.PathValue("name")); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{})
	})
	mux.HandleFunc("POST /v2/repository/models/{name}/unload", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Unload(r.PathValue("name")); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no endpoint %s %s (see the KServe v2 protocol: /v2, /v2/health/ready, /v2/models/NAME[/versions/V][/ready|/infer], /v2/repository/...)", r.Method, r.URL.Path)})
	})
	return mux
}

type tensorMetadata struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

func (s *Server) httpMetadata(w http.ResponseWriter, r *http.Request) {
	info, err := s.Model(r.PathValue("name"), r.PathValue("version"))
	if err != nil {
		writeError(w, err)
		return
	}
	meta := struct {
		Name     string           `json:"name"`
		Versions []string         `json:"versions"`
		Platform string           `json:"platform"`
		Inputs   []tensorMetadata `json:"inputs"`
		Outputs  []tensorMetadata `json:"outputs"`
	}{Name: info.Name, Versions: info.Versions, Platform: Platform, Inputs: []tensorMetadata{}, Outputs: []tensorMetadata{}}
	for _, b := range info.Inputs {
		meta.Inputs = append(meta.Inputs, tensorMetadata{b.Name, datatypeName(b.DType), metadataShape(b)})
	}
	for _, b := range info.Outputs {
		meta.Outputs = append(meta.Outputs, tensorMetadata{b.Name, datatypeName(b.DType), metadataShape(b)})
	}
	writeJSON(w, http.StatusOK, meta)
}

// Platform is what model metadata names as a model's platform.
const Platform = "kiln"

func datatypeName(onnxName string) string {
	d, err := ir.ParseDType(onnxName)
	if err != nil {
		return onnxName
	}
	return Datatype(d)
}

// The JSON request and response of POST .../infer.
type (
	httpRequest struct {
		ID         string          `json:"id"`
		Parameters httpParameters  `json:"parameters"`
		Inputs     []httpInput     `json:"inputs"`
		Outputs    []httpRequested `json:"outputs"`
	}
	httpParameters struct {
		BinaryDataSize   *int64 `json:"binary_data_size,omitempty"`
		BinaryData       bool   `json:"binary_data,omitempty"`
		BinaryDataOutput bool   `json:"binary_data_output,omitempty"`
	}
	httpInput struct {
		Name       string          `json:"name"`
		Shape      *[]int64        `json:"shape"`
		Datatype   string          `json:"datatype"`
		Parameters httpParameters  `json:"parameters"`
		Data       json.RawMessage `json:"data"`
	}
	httpRequested struct {
		Name       string         `json:"name"`
		Parameters httpParameters `json:"parameters"`
	}
	httpResponse struct {
		ModelName    string       `json:"model_name"`
		ModelVersion string       `json:"model_version"`
		ID           string       `json:"id,omitempty"`
		Outputs      []httpOutput `json:"outputs"`
	}
	httpOutput struct {
		Name       string          `json:"name"`
		Datatype   string          `json:"datatype"`
		Shape      []int64         `json:"shape"`
		Parameters *httpParameters `json:"parameters,omitempty"`
		Data       json.RawMessage `json:"data,omitempty"`
	}
)

func (s *Server) httpInfer(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	err := s.httpInferResponse(w, r)
	if err != nil {
		writeError(w, err)
	}
	s.observe(r.PathValue("name"), "http", start, err)
}

// httpInferResponse answers an infer request, or returns the error to
// answer with.
func (s *Server) httpInferResponse(w http.ResponseWriter, r *http.Request) (err error) {
	defer recovered(&err)
	req, binaryOut, err := s.parseHTTPInfer(w, r)
	if err != nil {
		return err
	}
	resp, err := s.Infer(r.Context(), req)
	if err != nil {
		return err
	}
	out := httpResponse{ModelName: resp.Model, ModelVersion: resp.Version, ID: resp.ID}
	var tail [][]byte
	for i, t := range resp.Outputs {
		o := httpOutput{Name: t.Name, Datatype: Datatype(t.DType), Shape: t.Dims}
		if o.Shape == nil {
			o.Shape = []int64{}
		}
		if binaryOut[min(i, len(binaryOut)-1)] {
			n := int64(len(t.Raw))
			o.Parameters = &httpParameters{BinaryDataSize: &n}
			tail = append(tail, t.Raw)
		} else {
			o.Data = appendJSONData(nil, t)
		}
		out.Outputs = append(out.Outputs, o)
	}
	header, err := json.Marshal(out)
	if err != nil {
		return &Error{Kind: Internal, Msg: err.Error()}
	}
	if len(tail) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.Write(header)
		return nil
	}
	size := len(header)
	for _, b := range tail {
		size += len(b)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(HeaderLength, strconv.Itoa(len(header)))
	w.Header().Set("Content-Length", strconv.Itoa(size))
	w.Write(header)
	for _, b := range tail {
		w.Write(b)
	}
	return nil
}

// parseHTTPInfer reads an infer request: JSON, or with the binary tensor
// data extension a JSON header (Inference-Header-Content-Length bytes)
// followed by the inputs' raw bytes in order. binaryOut says, for each
// output asked for, whether it goes back as raw bytes (one flag for all
// when none is named).
func (s *Server) parseHTTPInfer(w http.ResponseWriter, r *http.Request) (*Request, []bool, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, nil, badRequest("the request body is over %d bytes (--max-request-bytes)", tooBig.Limit)
		}
		return nil, nil, badRequest("reading the request body: %v", err)
	}
	header, binary := body, []byte(nil)
	if h := r.Header.Get(HeaderLength); h != "" {
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil || n < 0 || n > int64(len(body)) {
			return nil, nil, badRequest("%s: %q is not a length within the %d-byte body", HeaderLength, h, len(body))
		}
		header, binary = body[:n], body[n:]
	}
	var hr httpRequest
	dec := json.NewDecoder(bytes.NewReader(header))
	if err := dec.Decode(&hr); err != nil {
		return nil, nil, badRequest("malformed JSON request: %v", err)
	}
	if dec.More() {
		return nil, nil, badRequest("malformed JSON request: data after the request object (binary data needs the %s header)", HeaderLength)
	}
	req := &Request{Model: r.PathValue("name"), Version: r.PathValue("version"), ID: hr.ID}
	if len(hr.Inputs) == 0 {
		return nil, nil, badRequest("the request has no inputs")
	}
	offset := int64(0)
	for _, in := range hr.Inputs {
		if in.Name == "" {
			return nil, nil, badRequest("an input has no name")
		}
		if in.Shape == nil {
			return nil, nil, badRequest("input %q has no shape", in.Name)
		}
		if in.Datatype == "" {
			return nil, nil, badRequest("input %q has no datatype", in.Name)
		}
		input := Input{Name: in.Name, Datatype: in.Datatype, Shape: *in.Shape}
		switch size := in.Parameters.BinaryDataSize; {
		case size != nil && in.Data != nil:
			return nil, nil, badRequest("input %q has both data and binary_data_size", in.Name)
		case size != nil:
			// Compared with what is left, not as offset+size: a lying
			// size near 2^63 would wrap the sum and pass.
			if *size < 0 || *size > int64(len(binary))-offset {
				return nil, nil, badRequest("input %q: binary_data_size %d goes past the %d bytes of binary data after the JSON header (%d left after the inputs before it)", in.Name, *size, len(binary), int64(len(binary))-offset)
			}
			raw := binary[offset : offset+*size]
			offset += *size
			input.Decode = func(d ir.DType, shape []int64) (*ir.Tensor, error) { return rawTensor(raw, d, shape) }
		case in.Data != nil:
			data := in.Data
			input.Decode = func(d ir.DType, shape []int64) (*ir.Tensor, error) { return decodeJSONData(data, d, shape) }
		default:
			return nil, nil, badRequest("input %q has no data (a \"data\" array, or parameters.binary_data_size with the binary tensor data extension)", in.Name)
		}
		req.Inputs = append(req.Inputs, input)
	}
	if offset != int64(len(binary)) {
		return nil, nil, badRequest("%d bytes of binary data follow the JSON header, the inputs' binary_data_size add up to %d", len(binary), offset)
	}
	var binaryOut []bool
	for _, o := range hr.Outputs {
		req.Outputs = append(req.Outputs, o.Name)
		binaryOut = append(binaryOut, o.Parameters.BinaryData || hr.Parameters.BinaryDataOutput)
	}
	if req.Outputs == nil { // all outputs, binary_data_output for each
		binaryOut = []bool{hr.Parameters.BinaryDataOutput}
	}
	return req, binaryOut, nil
}

// rawTensor copies raw little-endian elements into a tensor of shape.
func rawTensor(raw []byte, d ir.DType, shape []int64) (*ir.Tensor, error) {
	n, err := elements(shape, d)
	if err != nil {
		return nil, err
	}
	if want := n * int64(d.Size()); int64(len(raw)) != want {
		return nil, fmt.Errorf("%d bytes of data, shape %v of %s needs %d", len(raw), shape, Datatype(d), want)
	}
	t := ir.NewTensor(d, shape...)
	copy(t.Raw, raw)
	return t, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// HTTPStatus is the status a request's error is answered with.
func HTTPStatus(err error) int {
	switch kindOf(err) {
	case BadRequest:
		return http.StatusBadRequest
	case Unavailable, Timeout:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, HTTPStatus(err), map[string]string{"error": err.Error()})
}
