// Package onnx reads and writes ONNX models (onnx.proto's ModelProto) and
// bare TensorProto files, converting to and from kiln's ir.
//
// The protobuf messages are decoded by hand with protowire: payloads such as
// raw_data are subslices of the input buffer until they are copied, once,
// into a tensor's aligned storage. Every tensor data field (raw_data, the
// typed repeated fields, external data) is normalised into ir.Tensor.Raw,
// so a written model always carries raw_data (string_data for strings) and
// keeps its weights inline.
//
// Names become *ir.Value pointers: a node input that names nothing defined in
// its graph or an enclosing one is an error. Nodes are put in topological
// order.
//
// Not representable in ir, and therefore rejected with an error: model-local
// functions, training_info, segmented tensors and opaque types. Ignored on
// read (and so not written back): quantization_annotation, device
// configurations, and the metadata_props of tensors and value infos.
package onnx
