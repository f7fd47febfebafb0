#!/usr/bin/python3
"""Generates testdata/ml: small ai.onnx.ml models (random tree ensembles,
linear models, support vector machines, preprocessing ops) with outputs
from ONNX Runtime, in the ONNX backend-test layout (model.onnx,
test_data_set_0/input_*.pb, output_*.pb) that ir/ops's TestMLGolden runs
through the reference.

    ../shared/tools/ort/setup.sh     # once
    /usr/bin/python3 testdata/ml/gen.py

The random draws are seeded: rerunning gives the same files.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("GEN_OUT", HERE)  # where the test folders go
ORT = os.environ.get("ORT_NODE", os.path.expanduser("~/.cache/kiln-ort/node_modules/onnxruntime-node"))
ML = "ai.onnx.ml"
MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
POSTS = ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"]
AGGS = ["AVERAGE", "SUM", "MIN", "MAX"]  # TreeEnsemble-5's integer codes are these indices
GRID = np.linspace(-2, 2, 9)  # exact in float32, so EQ/NEQ splits and inputs meet
ORT_TYPES = {np.float32: "float32", np.float64: "float64", np.int64: "int64", np.int32: "int32"}
PROTO_TYPES = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.int64: TensorProto.INT64,
               np.int32: TensorProto.INT32}


def features(rng, n, f, dtype, nan=0.1):
    """Inputs drawn half from the split grid, half continuous, some NaN."""
    x = np.where(rng.random((n, f)) < 0.5, rng.choice(GRID, (n, f)), rng.normal(0, 1.5, (n, f)))
    if np.dtype(dtype).kind == "i":
        return np.round(x * 2).astype(dtype)
    x[rng.random((n, f)) < nan] = np.nan
    return x.astype(dtype)


def rand_tree(rng, n_features, depth, modes=MODES, integer=False):
    """A tree as a list of nodes in depth-first order, ids from 0; a node is
    a dict with mode, feature, value, true, false, missing (leaves: mode LEAF)."""
    nodes = []

    def build(d):
        i = len(nodes)
        node = {"id": i}
        nodes.append(node)
        if d == 0 or (d < depth and rng.random() < 0.25):
            node.update(mode="LEAF", feature=0, value=0.0, true=0, false=0, missing=0)
            return i
        value = rng.choice(GRID) if rng.random() < 0.6 else rng.normal(0, 1)
        if integer:
            value = np.round(value * 2) + (0.5 if rng.random() < 0.3 else 0)
        node.update(mode=str(rng.choice(modes)), feature=int(rng.integers(n_features)),
                    value=float(np.float32(value)), missing=int(rng.random() < 0.4))
        node["true"] = build(d - 1)
        node["false"] = build(d - 1)
        return i

    build(depth)
    return nodes


def legacy_nodes(trees, as_tensor=False):
    """The nodes_* attributes of TreeEnsembleRegressor/Classifier."""
    a = {k: [] for k in ["nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                         "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true"]}
    for t, nodes in enumerate(trees):
        for n in nodes:
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(n["id"])
            a["nodes_featureids"].append(n["feature"])
            a["nodes_modes"].append(n["mode"])
            a["nodes_values"].append(n["value"])
            a["nodes_truenodeids"].append(n["true"])
            a["nodes_falsenodeids"].append(n["false"])
            a["nodes_missing_value_tracks_true"].append(n["missing"])
    if as_tensor:
        a["nodes_values_as_tensor"] = numpy_helper.from_array(np.array(a.pop("nodes_values"), np.float64), "v")
    return a


def leaf_votes(rng, trees, prefix, n_out, subset=True, positive=False, only=None):
    """Weights at the leaves: each leaf votes for some outputs (all, one, or a
    random subset), as the class_* or target_* attributes."""
    a = {f"{prefix}_treeids": [], f"{prefix}_nodeids": [], f"{prefix}_ids": [], f"{prefix}_weights": []}
    for t, nodes in enumerate(trees):
        for n in nodes:
            if n["mode"] != "LEAF":
                continue
            if only is not None:
                ids = [only]
            elif subset:
                ids = sorted(rng.choice(n_out, int(rng.integers(1, n_out + 1)), replace=False))
            else:
                ids = range(n_out)
            for i in ids:
                w = rng.random() if positive else rng.normal()
                a[f"{prefix}_treeids"].append(t)
                a[f"{prefix}_nodeids"].append(n["id"])
                a[f"{prefix}_ids"].append(int(i))
                a[f"{prefix}_weights"].append(float(np.float32(w)))
    return a


def run_ort(model_path, inputs):
    req = {"model": model_path, "inputs": {}}
    for name, v in inputs.items():
        if v.dtype == object:
            req["inputs"][name] = {"type": "string", "dims": list(v.shape), "data": [str(s) for s in v.ravel()]}
            continue
        data = [("NaN" if np.isnan(e) else float(e)) if v.dtype.kind == "f" else int(e) for e in v.ravel()]
        req["inputs"][name] = {"type": ORT_TYPES[v.dtype.type], "dims": list(v.shape), "data": data}
    p = subprocess.run(["node", os.path.join(HERE, "ort_run.js")], input=json.dumps(req).encode(),
                       capture_output=True, env=dict(os.environ, ORT_NODE=ORT))
    if p.returncode != 0:
        raise RuntimeError(f"{model_path}: ONNX Runtime failed: {p.stderr.decode()}")
    return json.loads(p.stdout)


NP_OF_ORT = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32}


def from_ort(v):
    if v["type"] == "string":
        return np.array(v["data"], dtype=object).reshape(v["dims"])
    data = [float("nan") if e == "NaN" else e for e in v["data"]]
    return np.array([int(e) for e in data] if v["type"] == "int64" else data, NP_OF_ORT[v["type"]]).reshape(v["dims"])


def save(name, nodes, inputs, outputs, ml_opset, check=None):
    """Writes one test folder; outputs are (name, elem type) pairs, shapes
    left to inference. check(inputs, ort_outputs) may compare ORT against
    an independent numpy computation."""
    dir = os.path.join(OUT, name)
    shutil.rmtree(dir, ignore_errors=True)
    os.makedirs(os.path.join(dir, "test_data_set_0"))
    ins = [helper.make_tensor_value_info(k, TensorProto.STRING if v.dtype == object else PROTO_TYPES[v.dtype.type],
                                         list(v.shape)) for k, v in inputs.items()]
    outs = [helper.make_tensor_value_info(k, t, None) for k, t in outputs]
    graph = helper.make_graph(nodes, name, ins, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, ml_opset)],
                              ir_version=10 if ml_opset >= 5 else 8)
    path = os.path.join(dir, "model.onnx")
    onnx.save(model, path)
    got = run_ort(path, inputs)
    for i, (k, v) in enumerate(inputs.items()):
        onnx.save_tensor(numpy_helper.from_array(v, k), os.path.join(dir, "test_data_set_0", f"input_{i}.pb"))
    res = {}
    for i, (k, _) in enumerate(outputs):
        res[k] = from_ort(got[k])
        onnx.save_tensor(numpy_helper.from_array(res[k], k), os.path.join(dir, "test_data_set_0", f"output_{i}.pb"))
    if check is not None:
        check(inputs, res)
    print(name, {k: v.shape for k, v in res.items()})


# --- tree ensembles, opsets 1 and 3 ----------------------------------------------------------------------

def regressor_cases(rng):
    cases = [
        ("tree_reg1_sum", 1, np.float32, dict(aggregate_function="SUM", base_values=[0.5, -1.0]), 2, "NONE"),
        ("tree_reg3_average_double", 3, np.float64, dict(aggregate_function="AVERAGE"), 3, "NONE"),
        ("tree_reg1_min", 1, np.float32, dict(aggregate_function="MIN"), 2, "NONE"),
        ("tree_reg1_max_f64", 1, np.float64, dict(aggregate_function="MAX", base_values=[0.25, 2.0, -1.0]), 3, "NONE"),
        ("tree_reg1_softmax", 1, np.float32, dict(aggregate_function="SUM"), 3, "SOFTMAX"),
        ("tree_reg1_logistic", 1, np.float32, dict(aggregate_function="SUM", base_values=[0.1, 0.2]), 2, "LOGISTIC"),
        ("tree_reg1_softmax_zero", 1, np.float32, dict(aggregate_function="SUM"), 3, "SOFTMAX_ZERO"),
        ("tree_reg1_one_target", 1, np.float32, dict(aggregate_function="SUM", base_values=[0.3]), 1, "NONE"),
        ("tree_reg1_average_one_target", 1, np.float32, dict(aggregate_function="AVERAGE"), 1, "NONE"),
    ]
    for name, opset, dtype, extra, n_targets, post in cases:
        n_features = 4
        integer = np.dtype(dtype).kind == "i"
        trees = [rand_tree(rng, n_features, int(rng.integers(2, 5)), integer=integer) for _ in range(4)]
        attrs = legacy_nodes(trees, as_tensor=name.endswith("double"))
        attrs.update(leaf_votes(rng, trees, "target", n_targets))
        if name.endswith("double"):
            w = attrs.pop("target_weights")
            attrs["target_weights_as_tensor"] = numpy_helper.from_array(np.array(w, np.float64), "w")
            attrs["base_values_as_tensor"] = numpy_helper.from_array(np.array([0.125, -0.5, 1.0], np.float64), "b")
        attrs.update(extra)
        node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, n_targets=n_targets,
                                post_transform=post, **attrs)
        save(name, [node], {"X": features(rng, 12, n_features, dtype)}, [("Y", TensorProto.FLOAT)], opset)
    # PROBIT needs scores in (0, 1): small positive weights, one target.
    trees = [rand_tree(rng, 3, 3) for _ in range(3)]
    attrs = legacy_nodes(trees)
    attrs.update(leaf_votes(rng, trees, "target", 1))
    attrs["target_weights"] = [0.05 + 0.2 * rng.random() for _ in attrs["target_weights"]]
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, n_targets=1, post_transform="PROBIT",
                            base_values=[0.1], **attrs)
    save("tree_reg1_probit", [node], {"X": features(rng, 10, 3, np.float32)}, [("Y", TensorProto.FLOAT)], 1)


def classifier_cases(rng):
    # (name, opset, dtype, labels, how leaves vote, post, base_values)
    cases = [
        ("tree_cls1_int_softmax", 1, np.float32, [3, 7, 11, 2], "subset", "SOFTMAX", [0.1, -0.2, 0.3, 0.0]),
        ("tree_cls1_string_none", 1, np.float32, ["a", "bb", "c"], "subset", "NONE", None),
        ("tree_cls1_int_all_logistic", 1, np.float64, [0, 1, 2], "all", "LOGISTIC", None),
        ("tree_cls1_softmax_zero", 1, np.float32, [5, 6, 7, 8], "subset", "SOFTMAX_ZERO", None),
        ("tree_cls3_double_string", 3, np.float64, ["x", "y", "z"], "all", "NONE", [0.5, 0.25, -0.5]),
        ("tree_cls1_int64_input", 1, np.int64, [0, 1, 2], "all", "SOFTMAX", None),
        # Two classes: every leaf votes for both (scikit-learn's forests), or
        # only class 0 with mixed-sign weights (XGBoost, LightGBM) or positive
        # ones (a single-column probability).
        ("tree_cls1_binary_both", 1, np.float32, ["no", "yes"], "all", "NONE", None),
        ("tree_cls1_binary_logistic", 1, np.float32, [0, 1], "class0", "LOGISTIC", None),
        ("tree_cls1_binary_logistic_base", 1, np.float32, [4, 9], "class0", "LOGISTIC", [0.3]),
        ("tree_cls1_binary_none", 1, np.float32, [0, 1], "class0", "NONE", None),
        ("tree_cls1_binary_positive", 1, np.float32, ["neg", "pos"], "class0_positive", "NONE", None),
        ("tree_cls1_binary_base2", 1, np.float32, [0, 1], "all", "NONE", [0.2, -0.1]),
    ]
    for name, opset, dtype, labels, votes, post, base in cases:
        n_features = 4
        integer = np.dtype(dtype).kind == "i"
        trees = [rand_tree(rng, n_features, int(rng.integers(2, 5)), integer=integer) for _ in range(5)]
        attrs = legacy_nodes(trees, as_tensor=opset == 3)
        attrs.update(leaf_votes(rng, trees, "class", len(labels), subset=votes == "subset",
                                positive=votes in ("all", "class0_positive"),
                                only=0 if votes.startswith("class0") else None))
        if votes == "all" and len(labels) == 2:  # probabilities that add to 1 per leaf
            w = attrs["class_weights"]
            for i in range(0, len(w), 2):
                w[i + 1] = float(np.float32(1 - w[i]))
        if opset == 3:
            attrs["class_weights_as_tensor"] = numpy_helper.from_array(np.array(attrs.pop("class_weights"), np.float64), "w")
        if base is not None:
            if opset == 3:
                attrs["base_values_as_tensor"] = numpy_helper.from_array(np.array(base, np.float64), "b")
            else:
                attrs["base_values"] = base
        key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_int64s"
        node = helper.make_node("TreeEnsembleClassifier", ["X"], ["Y", "Z"], domain=ML, post_transform=post,
                                **{key: labels}, **attrs)
        label_type = TensorProto.STRING if isinstance(labels[0], str) else TensorProto.INT64
        save(name, [node], {"X": features(rng, 12, n_features, dtype)}, [("Y", label_type), ("Z", TensorProto.FLOAT)], opset)


# --- TreeEnsemble-5 ---------------------------------------------------------------------------------------

def v5_attrs(rng, trees, n_targets, dtype, member_sets):
    """TreeEnsemble-5's attributes for trees of rand_tree: interior nodes in
    nodes_*, each leaf one weight for one target; member_sets gives the
    MEMBER nodes' sets by (tree, node id)."""
    index, leaf_index = {}, {}
    interior, leaves = [], []
    for t, nodes in enumerate(trees):
        for n in nodes:
            if n["mode"] == "LEAF":
                leaf_index[(t, n["id"])] = len(leaves)
                leaves.append((int(rng.integers(n_targets)), float(np.float32(rng.normal()))))
            else:
                index[(t, n["id"])] = len(interior)
                interior.append((t, n))
    codes = {m: i for i, m in enumerate(MODES + ["BRANCH_MEMBER"])}
    a = {k: [] for k in ["nodes_featureids", "nodes_modes", "nodes_splits", "nodes_truenodeids", "nodes_trueleafs",
                         "nodes_falsenodeids", "nodes_falseleafs", "nodes_missing_value_tracks_true"]}
    members = []
    for t, n in interior:
        a["nodes_featureids"].append(n["feature"])
        a["nodes_modes"].append(codes[n["mode"]])
        a["nodes_splits"].append(np.nan if n["mode"] == "BRANCH_MEMBER" else n["value"])
        a["nodes_missing_value_tracks_true"].append(n["missing"])
        if n["mode"] == "BRANCH_MEMBER":
            members += member_sets[(t, n["id"])] + [np.nan]
        for side in ("true", "false"):
            child = trees[t][n[side]]
            is_leaf = child["mode"] == "LEAF"
            a[f"nodes_{side}nodeids"].append(leaf_index[(t, child["id"])] if is_leaf else index[(t, child["id"])])
            a[f"nodes_{side}leafs"].append(int(is_leaf))
    roots = []
    for t, nodes in enumerate(trees):
        if nodes[0]["mode"] == "LEAF":  # a lone leaf: a node whose both sides are it
            roots.append(len(a["nodes_featureids"]))
            for k, v in [("featureids", 0), ("modes", 0), ("splits", 0.0), ("missing_value_tracks_true", 0),
                         ("truenodeids", leaf_index[(t, 0)]), ("falsenodeids", leaf_index[(t, 0)]),
                         ("trueleafs", 1), ("falseleafs", 1)]:
                a["nodes_" + k].append(v)
        else:
            roots.append(index[(t, 0)])
    a["nodes_modes"] = numpy_helper.from_array(np.array(a["nodes_modes"], np.uint8), "modes")
    a["nodes_splits"] = numpy_helper.from_array(np.array(a["nodes_splits"], dtype), "splits")
    a["leaf_targetids"] = [l[0] for l in leaves]
    a["leaf_weights"] = numpy_helper.from_array(np.array([l[1] for l in leaves], dtype), "weights")
    a["tree_roots"] = roots
    if members:
        a["membership_values"] = numpy_helper.from_array(np.array(members, dtype), "members")
    return a


def tree_ensemble_cases(rng):
    cases = [  # name, dtype, n_targets, aggregate, post
        ("tree_ensemble_sum", np.float32, 3, "SUM", "NONE"),
        ("tree_ensemble_average_double", np.float64, 2, "AVERAGE", "NONE"),
        ("tree_ensemble_min", np.float32, 2, "MIN", "NONE"),
        ("tree_ensemble_max_double", np.float64, 3, "MAX", "NONE"),
        ("tree_ensemble_softmax", np.float32, 3, "SUM", "SOFTMAX"),
        ("tree_ensemble_logistic", np.float32, 2, "SUM", "LOGISTIC"),
        ("tree_ensemble_softmax_zero", np.float32, 3, "SUM", "SOFTMAX_ZERO"),
    ]
    for name, dtype, n_targets, agg, post in cases:
        n_features = 3
        trees = [rand_tree(rng, n_features, int(rng.integers(2, 5)), modes=MODES + ["BRANCH_MEMBER"])
                 for _ in range(4)]
        trees.append(rand_tree(rng, n_features, 0))  # a lone leaf
        sets = {}
        for t, nodes in enumerate(trees):
            for n in nodes:
                if n["mode"] == "BRANCH_MEMBER":
                    sets[(t, n["id"])] = [float(v) for v in rng.choice(GRID[::2], int(rng.integers(1, 4)), replace=False)]
        attrs = v5_attrs(rng, trees, n_targets, dtype, sets)
        node = helper.make_node("TreeEnsemble", ["X"], ["Y"], domain=ML, n_targets=n_targets,
                                aggregate_function=AGGS.index(agg), post_transform=POSTS.index(post), **attrs)
        # ONNX Runtime casts a MEMBER node's input to an integer before the
        # lookup, so its inputs here are integers (or NaN), where the cast
        # changes nothing.
        x = np.round(features(rng, 12, n_features, dtype))
        plain = {k: (numpy_helper.to_array(v) if isinstance(v, TensorProto) else v) for k, v in attrs.items()}
        plain["n_targets"] = n_targets
        check = None
        if agg == "SUM" and post == "NONE":  # eval_v5 agrees with ONNX Runtime where both run
            check = lambda ins, res: np.testing.assert_allclose(eval_v5(plain, ins["X"]), res["Y"], rtol=1e-5, atol=1e-5)
        if post in ("SOFTMAX", "LOGISTIC"):
            # ONNX Runtime reads codes 1 and 2 the other way round from
            # ONNX's definition (1 SOFTMAX, 2 LOGISTIC): the expected output
            # is ONNX's, checked against ORT's output for the other code.
            raw = eval_v5(plain, x).astype(np.float64)
            soft = np.exp(raw - raw.max(axis=1, keepdims=True))
            soft /= soft.sum(axis=1, keepdims=True)
            logi = 1 / (1 + np.exp(-raw))
            want, ort_gives = (soft, logi) if post == "SOFTMAX" else (logi, soft)
            check = lambda ins, res, w=want, o=ort_gives: (np.testing.assert_allclose(res["Y"], o, rtol=1e-5, atol=1e-6), w)
        save(name, [node], {"X": x}, [("Y", PROTO_TYPES[dtype])], 5, check)
        if post in ("SOFTMAX", "LOGISTIC"):
            onnx.save_tensor(numpy_helper.from_array(want.astype(dtype), "Y"), os.path.join(OUT, name, "test_data_set_0", "output_0.pb"))
    member_floats_case(rng)


def eval_v5(a, x):
    """TreeEnsemble-5 by its definition, for what ONNX Runtime cannot run:
    sets of non-integers, inputs between them."""
    sets, cur = [], []
    for v in a["membership_values"]:
        if np.isnan(v):
            sets.append(cur)
            cur = []
        else:
            cur.append(v)
    member = {}
    for i, m in enumerate(a["nodes_modes"]):
        if m == 6:
            member[i] = sets[len(member)]
    tests = [np.less_equal, np.less, np.greater_equal, np.greater, np.equal, np.not_equal]
    out = np.zeros((len(x), a["n_targets"]), x.dtype)
    for r, row in enumerate(x):
        for i in a["tree_roots"]:
            while True:
                v = row[a["nodes_featureids"][i]]
                m = a["nodes_modes"][i]
                took = (v in member[i]) if m == 6 else bool(tests[m](v, a["nodes_splits"][i]))
                took = took or (np.isnan(v) and a["nodes_missing_value_tracks_true"][i] == 1)
                side = "true" if took else "false"
                nxt = a[f"nodes_{side}nodeids"][i]
                if a[f"nodes_{side}leafs"][i]:
                    out[r, a["leaf_targetids"][nxt]] += a["leaf_weights"][nxt]
                    break
                i = nxt
    return out


def member_floats_case(rng):
    """Sets of non-integers, with inputs on and between their members: the
    outputs come from eval_v5, ONNX Runtime refusing such sets."""
    trees = [rand_tree(rng, 2, 3, modes=["BRANCH_MEMBER", "BRANCH_LEQ"]) for _ in range(3)]
    sets = {(t, n["id"]): [float(v) for v in rng.choice(GRID, 3, replace=False)]
            for t, nodes in enumerate(trees) for n in nodes if n["mode"] == "BRANCH_MEMBER"}
    attrs = v5_attrs(rng, trees, 2, np.float32, sets)
    node = helper.make_node("TreeEnsemble", ["X"], ["Y"], domain=ML, n_targets=2, aggregate_function=1, **attrs)
    x = features(rng, 12, 2, np.float32)
    plain = {k: (numpy_helper.to_array(v) if isinstance(v, TensorProto) else v) for k, v in attrs.items()}
    plain["n_targets"] = 2
    save_numpy("tree_ensemble_member_floats", node, x, eval_v5(plain, x))


def save_numpy(name, node, x, y):
    """Writes a test folder whose output a numpy computation gave."""
    dir = os.path.join(OUT, name)
    shutil.rmtree(dir, ignore_errors=True)
    os.makedirs(os.path.join(dir, "test_data_set_0"))
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("X", PROTO_TYPES[x.dtype.type], list(x.shape))],
                              [helper.make_tensor_value_info("Y", PROTO_TYPES[y.dtype.type], None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 5)], ir_version=10)
    onnx.save(model, os.path.join(dir, "model.onnx"))
    onnx.save_tensor(numpy_helper.from_array(x, "X"), os.path.join(dir, "test_data_set_0", "input_0.pb"))
    onnx.save_tensor(numpy_helper.from_array(y, "Y"), os.path.join(dir, "test_data_set_0", "output_0.pb"))
    print(name, "(numpy)", y.shape)


# --- linear models and preprocessing ----------------------------------------------------------------------

def linear_cases(rng):
    for name, dtype, targets, post in [("linear_reg", np.float32, 3, "NONE"), ("linear_reg_one", np.float32, 1, "NONE"),
                                       ("linear_reg_softmax", np.float32, 3, "SOFTMAX")]:
        node = helper.make_node("LinearRegressor", ["X"], ["Y"], domain=ML, targets=targets, post_transform=post,
                                coefficients=[float(v) for v in rng.normal(size=targets * 4)],
                                intercepts=[float(v) for v in rng.normal(size=targets)])
        save(name, [node], {"X": features(rng, 6, 4, dtype, nan=0)}, [("Y", TensorProto.FLOAT)], 1)
    cases = [  # name, dtype, labels, rows of coefficients, multi_class, post
        ("linear_cls_ovr_logistic", np.float32, [1, 2, 3], 3, 0, "LOGISTIC"),
        ("linear_cls_softmax_string", np.float32, ["a", "b", "c", "d"], 4, 1, "SOFTMAX"),
        ("linear_cls_none_double", np.float64, [10, 20, 30], 3, 0, "NONE"),
        ("linear_cls_softmax_zero", np.float32, [0, 1, 2], 3, 0, "SOFTMAX_ZERO"),
        ("linear_cls_binary_logistic", np.float32, [0, 1], 1, 0, "LOGISTIC"),
        ("linear_cls_binary_none_string", np.float32, ["neg", "pos"], 1, 0, "NONE"),
        ("linear_cls_binary_two_rows", np.float32, [5, 9], 2, 0, "NONE"),
        ("linear_cls_int32", np.int32, [0, 1, 2], 3, 0, "NONE"),
    ]
    for name, dtype, labels, rows, multi, post in cases:
        key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_ints"
        node = helper.make_node("LinearClassifier", ["X"], ["Y", "Z"], domain=ML, multi_class=multi, post_transform=post,
                                coefficients=[float(v) for v in rng.normal(size=rows * 3)],
                                intercepts=[float(v) for v in rng.normal(size=rows)], **{key: labels})
        label_type = TensorProto.STRING if isinstance(labels[0], str) else TensorProto.INT64
        save(name, [node], {"X": features(rng, 7, 3, dtype, nan=0)}, [("Y", label_type), ("Z", TensorProto.FLOAT)], 1)


def prep_cases(rng):
    for norm in ["MAX", "L1", "L2"]:
        x = features(rng, 5, 4, np.float32, nan=0)
        x[1] = 0  # a zero row: Y == X
        node = helper.make_node("Normalizer", ["X"], ["Y"], domain=ML, norm=norm)
        save(f"normalizer_{norm.lower()}", [node], {"X": x}, [("Y", TensorProto.FLOAT)], 1)
    node = helper.make_node("Normalizer", ["X"], ["Y"], domain=ML, norm="L2")
    save("normalizer_l2_int64", [node], {"X": features(rng, 4, 3, np.int64)}, [("Y", TensorProto.FLOAT)], 1)
    node = helper.make_node("Scaler", ["X"], ["Y"], domain=ML, offset=[0.5, -1.0, 2.0], scale=[2.0, 0.5, -1.5])
    save("scaler", [node], {"X": features(rng, 5, 3, np.float32, nan=0)}, [("Y", TensorProto.FLOAT)], 1)
    node = helper.make_node("Scaler", ["X"], ["Y"], domain=ML, offset=[0.25], scale=[3.0])
    save("scaler_broadcast_int32", [node], {"X": features(rng, 4, 3, np.int32)}, [("Y", TensorProto.FLOAT)], 1)
    node = helper.make_node("OneHotEncoder", ["X"], ["Y"], domain=ML, cats_int64s=[1, 3, 5, -2], zeros=1)
    save("one_hot_encoder_int64", [node], {"X": np.array([[1, 3, 4], [5, -2, 1]], np.int64)}, [("Y", TensorProto.FLOAT)], 1)
    node = helper.make_node("OneHotEncoder", ["X"], ["Y"], domain=ML, cats_strings=["cat", "dog", "fish"])
    save("one_hot_encoder_string", [node], {"X": np.array([["dog", "cat"], ["bird", "fish"]], dtype=object)},
         [("Y", TensorProto.FLOAT)], 1)
    node = helper.make_node("OneHotEncoder", ["X"], ["Y"], domain=ML, cats_int64s=[0, 1, 2])
    save("one_hot_encoder_float", [node], {"X": np.array([0.0, 2.7, 1.0, 2.0], np.float32)}, [("Y", TensorProto.FLOAT)], 1)
    x = features(rng, 4, 3, np.float32, nan=0.3)
    node = helper.make_node("Imputer", ["X"], ["Y"], domain=ML, imputed_value_floats=[1.5, -2.0, 7.0],
                            replaced_value_float=float("nan"))
    save("imputer_nan", [node], {"X": x}, [("Y", TensorProto.FLOAT)], 1)
    x = np.array([[0, 3, -1], [-1, -1, 4]], np.int64)
    node = helper.make_node("Imputer", ["X"], ["Y"], domain=ML, imputed_value_int64s=[9], replaced_value_int64=-1)
    save("imputer_int64", [node], {"X": x}, [("Y", TensorProto.INT64)], 1)
    node = helper.make_node("FeatureVectorizer", ["A", "B", "C"], ["Y"], domain=ML, inputdimensions=[2, 4, 1])
    save("feature_vectorizer", [node], {"A": features(rng, 3, 2, np.float32, nan=0), "B": features(rng, 3, 3, np.float32, nan=0),
                                        "C": features(rng, 3, 2, np.float32, nan=0)}, [("Y", TensorProto.FLOAT)], 1)
    node = helper.make_node("FeatureVectorizer", ["A", "B"], ["Y"], domain=ML, inputdimensions=[3, 2])
    save("feature_vectorizer_int64", [node], {"A": features(rng, 2, 3, np.int64), "B": features(rng, 2, 2, np.int64)},
         [("Y", TensorProto.FLOAT)], 1)


# --- support vector machines ------------------------------------------------------------------------------

KERNEL_PARAMS = {"LINEAR": [0.0, 0.0, 0.0], "POLY": [0.5, 1.0, 3.0], "RBF": [0.15, 0.0, 0.0], "SIGMOID": [0.2, 0.1, 0.0]}


def floats(rng, n, scale=1.0):
    return [float(np.float32(v)) for v in rng.normal(0, scale, n)]


def svm_classifier_cases(rng):
    cases = [  # name, dtype, labels, vectors_per_class (None: liblinear), kernel, probabilities, post
        ("svm_cls_rbf_3", np.float32, [4, 7, 9], [2, 3, 1], "RBF", False, "NONE"),
        ("svm_cls_poly_proba_3_string", np.float32, ["a", "b", "c"], [2, 2, 2], "POLY", True, "NONE"),
        ("svm_cls_sigmoid_4_softmax", np.float32, [0, 1, 2, 3], [1, 2, 2, 1], "SIGMOID", False, "SOFTMAX"),
        ("svm_cls_rbf_4_proba_double", np.float64, [0, 1, 2, 3], [2, 1, 2, 3], "RBF", True, "NONE"),
        ("svm_cls_linear_kernel_3_int64", np.int64, [1, 2, 3], [2, 2, 1], "LINEAR", False, "LOGISTIC"),
        ("svm_cls_rbf_binary", np.float32, [0, 1], [3, 2], "RBF", False, "NONE"),
        ("svm_cls_poly_binary_string", np.float32, ["neg", "pos"], [2, 3], "POLY", False, "NONE"),
        ("svm_cls_rbf_binary_logistic", np.float32, [5, 6], [2, 2], "RBF", False, "LOGISTIC"),
        ("svm_cls_sigmoid_binary_softmax", np.float32, [0, 1], [2, 1], "SIGMOID", False, "SOFTMAX"),
        ("svm_cls_rbf_binary_proba", np.float32, ["no", "yes"], [3, 3], "RBF", True, "NONE"),
        ("svm_cls_liblinear_3", np.float32, [0, 1, 2], None, "LINEAR", False, "NONE"),
        ("svm_cls_liblinear_3_softmax_zero", np.float32, ["x", "y", "z"], None, "RBF", False, "SOFTMAX_ZERO"),
        ("svm_cls_liblinear_binary_mixed", np.float32, [0, 1], None, "LINEAR", False, "NONE"),
        ("svm_cls_liblinear_binary_positive", np.float32, [3, 8], None, "LINEAR", False, "NONE"),
        ("svm_cls_liblinear_one_probit", np.float32, [2], None, "LINEAR", False, "PROBIT"),
    ]
    n_features = 3
    for name, dtype, labels, per_class, kernel, proba, post in cases:
        k = len(labels)
        attrs = dict(kernel_type=kernel, kernel_params=KERNEL_PARAMS[kernel], post_transform=post)
        if per_class is None:  # liblinear: a row of coefficients per class, one rho
            coef = floats(rng, k * n_features)
            if name.endswith("positive"):
                coef = [abs(v) * 0.3 for v in coef]
            if name.endswith("probit"):
                coef = [0.02 * v for v in coef]
            attrs.update(coefficients=coef, rho=[0.3 if k == 1 else float(np.float32(rng.normal()))])
        else:
            v = sum(per_class)
            pairs = k * (k - 1) // 2
            attrs.update(vectors_per_class=per_class, support_vectors=floats(rng, v * n_features),
                         coefficients=floats(rng, (k - 1) * v, 2.0), rho=floats(rng, pairs, 0.1))
            if proba:
                attrs.update(prob_a=[-abs(a) - 0.5 for a in floats(rng, pairs)], prob_b=floats(rng, pairs, 0.2))
        key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_ints"
        node = helper.make_node("SVMClassifier", ["X"], ["Y", "Z"], domain=ML, **{key: labels}, **attrs)
        label_type = TensorProto.STRING if isinstance(labels[0], str) else TensorProto.INT64
        x = features(rng, 9, n_features, dtype, nan=0)
        if np.dtype(dtype).kind == "i":
            x = (x // 2).astype(dtype)
        save(name, [node], {"X": x}, [("Y", label_type), ("Z", TensorProto.FLOAT)], 1)


def svm_regressor_cases(rng):
    cases = [  # name, support vectors (0: linear), kernel, one_class
        ("svm_reg_rbf", 5, "RBF", 0),
        ("svm_reg_poly", 4, "POLY", 0),
        ("svm_reg_sigmoid", 6, "SIGMOID", 0),
        ("svm_reg_linear_kernel", 3, "LINEAR", 0),
        ("svm_reg_liblinear", 0, "LINEAR", 0),
        ("svm_reg_rbf_one_class", 5, "RBF", 1),
    ]
    n_features = 4
    for name, n, kernel, one_class in cases:
        attrs = dict(kernel_type=kernel, kernel_params=KERNEL_PARAMS[kernel], n_supports=n, one_class=one_class,
                     rho=floats(rng, 1, 0.3))
        if n > 0:
            attrs.update(support_vectors=floats(rng, n * n_features), coefficients=floats(rng, n))
        else:
            attrs.update(coefficients=floats(rng, n_features))
        node = helper.make_node("SVMRegressor", ["X"], ["Y"], domain=ML, **attrs)
        save(name, [node], {"X": features(rng, 8, n_features, np.float32, nan=0)}, [("Y", TensorProto.FLOAT)], 1)


def main():
    groups = {"reg": regressor_cases, "cls": classifier_cases, "v5": tree_ensemble_cases, "linear": linear_cases,
              "prep": prep_cases, "svm_cls": svm_classifier_cases, "svm_reg": svm_regressor_cases}
    for key, fn in groups.items():
        if len(sys.argv) > 1 and key not in sys.argv[1:]:
            continue
        fn(np.random.default_rng(sum(map(ord, key))))


if __name__ == "__main__":
    main()
