# save(), shared by the gen.py scripts beside this file: a PyTorch 1.13
# export of a model (scripted for control flow, else traced) at opset 17
# with dynamic axes, and one test_data_set_K with PyTorch's outputs per
# input tuple, each at its own sizes.
import os

import torch
from onnx import numpy_helper


def save(name, model, inputs, names, outs, dyn, script=False):
    os.makedirs(name, exist_ok=True)
    m = torch.jit.script(model) if script else model
    torch.onnx.export(m, inputs[0], os.path.join(name, "model.onnx"), input_names=names,
                      output_names=outs, opset_version=17, dynamic_axes=dyn)
    for k, args in enumerate(inputs):
        d = os.path.join(name, "test_data_set_%d" % k)
        os.makedirs(d, exist_ok=True)
        with torch.no_grad():
            ys = m(*args)
        if not isinstance(ys, tuple):
            ys = (ys,)
        for i, a in enumerate(args):
            t = numpy_helper.from_array(a.numpy(), names[i])
            open(os.path.join(d, "input_%d.pb" % i), "wb").write(t.SerializeToString())
        for i, y in enumerate(ys):
            t = numpy_helper.from_array(y.numpy(), outs[i])
            open(os.path.join(d, "output_%d.pb" % i), "wb").write(t.SerializeToString())
