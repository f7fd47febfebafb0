// Runs one model in ONNX Runtime (the oracle of testdata/ml): reads
// {"model": path, "inputs": {name: {type, dims, data}}} on stdin and prints
// the outputs the same way. Used by gen.py; ORT_NODE names onnxruntime-node.
const ort = require(process.env.ORT_NODE);
const fs = require('fs');

const arrays = {float32: Float32Array, float64: Float64Array, int32: Int32Array, int64: BigInt64Array};

function toTensor(v) {
  if (v.type === 'string') return new ort.Tensor('string', v.data, v.dims);
  const data = v.type === 'int64' ? v.data.map(BigInt) : v.data.map(x => (x === 'NaN' ? NaN : x));
  return new ort.Tensor(v.type, arrays[v.type].from(data), v.dims);
}

function fromTensor(t) {
  let data = Array.from(t.data);
  if (t.type === 'int64') data = data.map(String);
  if (t.type === 'float32' || t.type === 'float64') data = data.map(x => (Number.isNaN(x) ? 'NaN' : x));
  return {type: t.type, dims: Array.from(t.dims), data};
}

async function main() {
  const req = JSON.parse(fs.readFileSync(0, 'utf8'));
  const inputs = {};
  for (const [k, v] of Object.entries(req.inputs)) inputs[k] = toTensor(v);
  const session = await ort.InferenceSession.create(req.model);
  const out = await session.run(inputs);
  const res = {};
  for (const k of session.outputNames) res[k] = fromTensor(out[k]);
  process.stdout.write(JSON.stringify(res));
}
main().catch(e => { process.stderr.write(String(e) + '\n'); process.exit(1); });
