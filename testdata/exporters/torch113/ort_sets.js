#!/usr/bin/env node
// ONNX Runtime as the second opinion on one export of this folder, for
// models of several inputs (../shared/tools/ort/ort_bench.js feeds input_0
// only):
//
//   node ort_sets.js --model DIR [--threads 1,2] [--budget 5] [--warmup 1]
//        [--state IN=OUT] [--ort PATH]   (default: what setup.sh installs)
//
// It runs every DIR/test_data_set_N (each input_N.pb fed under its
// TensorProto name) and compares every output with PyTorch's output_N.pb.
// With --state IN=OUT (stream: state=out1) a set whose input IN is the
// previous set's output OUT continues that stream: it is fed ORT's own OUT
// from the previous set instead, as a caller would. Then it times
// test_data_set_0 per thread count as ort_bench.js does (CPU EP, all graph
// optimizations, sequential; a warm-up of >= 3 runs and --warmup seconds,
// then --budget seconds of runs) and prints one JSON object.
'use strict';
const fs = require('fs');
const path = require('path');
const os = require('os');

function parseArgs(argv) {
  const a = {threads: '1,2', budget: 5, warmup: 1, state: '',
             ort: process.env.ORT_NODE || path.join(os.homedir(), '.cache/kiln-ort/node_modules/onnxruntime-node')};
  for (let i = 2; i < argv.length; i++) a[argv[i].replace(/^--/, '')] = argv[++i];
  a.threads = String(a.threads).split(',').map(Number);
  a.budget = Number(a.budget); a.warmup = Number(a.warmup);
  return a;
}

function varint(buf, pos) {
  let v = 0, mul = 1, b;
  do { b = buf[pos++]; v += (b & 0x7f) * mul; mul *= 128; } while (b & 0x80);
  return [v, pos];
}

// readTensor decodes a TensorProto as numpy_helper.from_array writes it:
// dims, data_type, name and raw_data.
const TYPES = {1: ['float32', Float32Array], 7: ['int64', BigInt64Array], 9: ['bool', Uint8Array]};
function readTensor(file) {
  const buf = fs.readFileSync(file);
  const t = {dims: [], dtype: 0, name: '', raw: Buffer.alloc(0)};
  for (let pos = 0; pos < buf.length;) {
    let key; [key, pos] = varint(buf, pos);
    const field = Math.floor(key / 8), wire = key & 7;
    if (wire === 0) {
      let v; [v, pos] = varint(buf, pos);
      if (field === 1) t.dims.push(v); else if (field === 2) t.dtype = v;
    } else if (wire === 2) {
      let n; [n, pos] = varint(buf, pos);
      const sub = buf.subarray(pos, pos + n); pos += n;
      if (field === 1) for (let p = 0; p < sub.length;) { let v; [v, p] = varint(sub, p); t.dims.push(v); }
      else if (field === 8) t.name = sub.toString('utf8');
      else if (field === 9) t.raw = sub;
    } else throw new Error(`${file}: wire type ${wire} is not what numpy_helper writes`);
  }
  const [type, Array_] = TYPES[t.dtype] || [];
  if (!type) throw new Error(`${file}: data_type ${t.dtype} unsupported`);
  const data = new Array_(t.raw.buffer.slice(t.raw.byteOffset, t.raw.byteOffset + t.raw.length));
  return {name: t.name, type, dims: t.dims, data};
}

function pbs(dir, prefix) {
  return fs.readdirSync(dir).filter(f => f.startsWith(prefix) && f.endsWith('.pb'))
    .sort((x, y) => parseInt(x.slice(prefix.length)) - parseInt(y.slice(prefix.length)))
    .map(f => readTensor(path.join(dir, f)));
}

function same(a, b) {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

function compare(got, want) {
  let maxAbs = 0, dd = 0, ww = 0;
  for (let i = 0; i < want.length; i++) {
    const g = Number(got[i]), w = Number(want[i]), d = g - w;
    maxAbs = Math.max(maxAbs, Math.abs(d)); dd += d * d; ww += w * w;
  }
  if (got.length !== want.length) maxAbs = Infinity;
  return {max_abs_err: maxAbs, rel_l2: ww ? Math.sqrt(dd / ww) : Math.sqrt(dd)};
}

function pct(s, q) {
  const i = (s.length - 1) * q, lo = Math.floor(i), hi = Math.ceil(i);
  return s[lo] + (s[hi] - s[lo]) * (i - lo);
}

async function main() {
  const args = parseArgs(process.argv);
  const ort = require(args.ort);
  const dir = args.model;
  const sets = fs.readdirSync(dir).filter(f => /^test_data_set_\d+$/.test(f))
    .sort((x, y) => parseInt(x.slice(14)) - parseInt(y.slice(14)))
    .map(f => ({name: f, inputs: pbs(path.join(dir, f), 'input_'), outputs: pbs(path.join(dir, f), 'output_')}));
  const [stateIn, stateOut] = args.state ? args.state.split('=') : [];
  const tensor = t => new ort.Tensor(t.type, t.data, t.dims);
  const result = {model: path.basename(dir), ort_version: (ort.env.versions || {}).node || null, sets: [], configs: []};

  const sess = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {executionProviders: ['cpu'],
    intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all', executionMode: 'sequential'});
  let prev = null;  // the previous set's PyTorch and ORT outputs
  for (const s of sets) {
    const feeds = {};
    let fed = false;
    for (const t of s.inputs) {
      const continues = !!prev && t.name === stateIn && same(t.data, prev.want[stateOut].data);
      feeds[t.name] = continues ? prev.got[stateOut] : tensor(t);
      fed = fed || continues;
    }
    const got = await sess.run(feeds);
    const outs = s.outputs.map(t => Object.assign({name: t.name}, compare(got[t.name].data, t.data)));
    result.sets.push({set: s.name, state_fed_back: fed, outputs: outs});
    prev = {got, want: Object.fromEntries(s.outputs.map(t => [t.name, t]))};
  }
  if (sess.release) await sess.release();

  const feeds = Object.fromEntries(sets[0].inputs.map(t => [t.name, tensor(t)]));
  for (const threads of args.threads) {
    const sess = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {executionProviders: ['cpu'],
      intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all', executionMode: 'sequential'});
    let w = 0;
    const tw = process.hrtime.bigint();
    while (w < 3 || (Number(process.hrtime.bigint() - tw) / 1e9 < args.warmup && w < 200)) { await sess.run(feeds); w++; }
    const times = [];
    const start = process.hrtime.bigint();
    while (times.length < 10 || Number(process.hrtime.bigint() - start) / 1e9 < args.budget) {
      const t = process.hrtime.bigint();
      await sess.run(feeds);
      times.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    const s = times.sort((x, y) => x - y);
    result.configs.push({threads, runs: s.length, median_ms: pct(s, 0.5), p90_ms: pct(s, 0.9), min_ms: s[0]});
    if (sess.release) await sess.release();
  }
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch(e => { process.stdout.write(JSON.stringify({error: String(e && e.message || e)}) + '\n'); process.exit(1); });
