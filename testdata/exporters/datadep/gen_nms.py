# Regenerates nms/: /usr/bin/python3 gen_nms.py
# An SSD-style post-processing graph written with onnx.helper (opset 17):
# NonMaxSuppression over a dynamic number of boxes and three classes, then
# the selected boxes gathered by their indices. The expected outputs come
# from a NumPy greedy NMS written here, independent of kiln and ONNX Runtime.
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model():
    boxes = helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, "B", 4])
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 3, "B"])
    sel = helper.make_tensor_value_info("selected", TensorProto.INT64, [None, 3])
    picked = helper.make_tensor_value_info("picked", TensorProto.FLOAT, [None, 4])
    consts = [
        numpy_helper.from_array(np.array([10], np.int64), "max_per_class"),
        numpy_helper.from_array(np.array([0.45], np.float32), "iou"),
        numpy_helper.from_array(np.array([0.05], np.float32), "score"),
        numpy_helper.from_array(np.array(2, np.int64), "two"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
    ]
    nodes = [
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_per_class", "iou", "score"], ["selected"]),
        helper.make_node("Gather", ["selected", "two"], ["box_index"], axis=1),
        helper.make_node("Gather", ["boxes", "zero"], ["all_boxes"], axis=0),
        helper.make_node("Gather", ["all_boxes", "box_index"], ["picked"], axis=0),
    ]
    g = helper.make_graph(nodes, "nms", [boxes, scores], [sel, picked], consts)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def iou(a, b):
    a = [min(a[0], a[2]), min(a[1], a[3]), max(a[0], a[2]), max(a[1], a[3])]
    b = [min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3])]
    area = lambda p: (p[2] - p[0]) * (p[3] - p[1])
    if area(a) <= 0 or area(b) <= 0:
        return 0.0
    h = min(a[2], b[2]) - max(a[0], b[0])
    w = min(a[3], b[3]) - max(a[1], b[1])
    if h <= 0 or w <= 0:
        return 0.0
    inter = h * w
    return inter / (area(a) + area(b) - inter)


def nms(boxes, scores, max_per_class=10, iou_max=0.45, score_min=0.05):
    out = []
    for c in range(scores.shape[1]):
        s = scores[0, c].astype(np.float64)
        order = [i for i in sorted(range(len(s)), key=lambda i: -s[i]) if s[i] > np.float64(np.float32(score_min))]
        kept = []
        for i in order:
            if len(kept) >= max_per_class:
                break
            if all(iou(boxes[0, i].astype(np.float64), boxes[0, j].astype(np.float64)) <= np.float64(np.float32(iou_max)) for j in kept):
                kept.append(i)
        out += [[0, c, i] for i in kept]
    return np.array(out, np.int64).reshape(-1, 3)


os.makedirs("nms", exist_ok=True)
onnx.save(model(), "nms/model.onnx")
rng = np.random.default_rng(3)
for k, n in enumerate([20, 7, 32]):  # within the default range of a dynamic dim (1..32)
    centres = rng.uniform(0, 1, (1, n, 2))
    sizes = rng.uniform(0.05, 0.4, (1, n, 2))
    boxes = np.concatenate([centres - sizes / 2, centres + sizes / 2], axis=2).astype(np.float32)
    scores = rng.uniform(0, 1, (1, 3, n)).astype(np.float32)
    if k == 1:
        scores *= 0.04  # below the threshold: nothing selected
    sel = nms(boxes, scores)
    picked = boxes[0][sel[:, 2]] if len(sel) else np.zeros((0, 4), np.float32)
    d = "nms/test_data_set_%d" % k
    os.makedirs(d, exist_ok=True)
    for i, (name, a) in enumerate([("boxes", boxes), ("scores", scores)]):
        open("%s/input_%d.pb" % (d, i), "wb").write(numpy_helper.from_array(a, name).SerializeToString())
    for i, (name, a) in enumerate([("selected", sel), ("picked", picked)]):
        open("%s/output_%d.pb" % (d, i), "wb").write(numpy_helper.from_array(a, name).SerializeToString())
