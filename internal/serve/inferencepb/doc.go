// Package inferencepb is the Go code protoc generates from KServe's Open
// Inference Protocol (v2) gRPC definition, grpc_predict_v2.proto: service
// inference.GRPCInferenceService and its messages, with the protocol's own
// names and field numbers, so that existing clients (Triton's, KServe's)
// talk to infer serve.
//
// grpc_predict_v2.proto is copied unchanged from the KServe project
// (github.com/kserve/kserve, docs/predict-api/v2/grpc_predict_v2.proto),
// Copyright 2020 kubeflow.org, under the Apache License 2.0 that its header
// states; the Go package is given on protoc's command line instead of in
// the file. `make proto` regenerates the .pb.go files; they are committed
// so that builds need no protoc.
package inferencepb
