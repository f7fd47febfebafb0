# Regenerates the exports in this folder: /usr/bin/python3 gen.py
# Models whose output shapes the data decides (NonZero, boolean masks),
# traced by PyTorch 1.13 at opset 17 with a dynamic batch; test_data_set_K
# holds PyTorch's outputs at a different batch and count each (one with no
# element selected).
import os

import torch
from onnx import numpy_helper

torch.manual_seed(0)


class Masks(torch.nn.Module):
    """x[x > 0.3] (NonZero, Transpose, GatherND), torch.nonzero, and a
    reduction over the selection."""

    def forward(self, x):
        pos = x[x > 0.3]
        idx = torch.nonzero(x < -0.5)
        return pos * 2.0, idx, pos.sum().unsqueeze(0)


def save(name, model, inputs, names, outs, dyn):
    os.makedirs(name, exist_ok=True)
    torch.onnx.export(model, inputs[0], os.path.join(name, "model.onnx"), input_names=names,
                      output_names=outs, opset_version=17, dynamic_axes=dyn)
    for k, args in enumerate(inputs):
        d = os.path.join(name, "test_data_set_%d" % k)
        os.makedirs(d, exist_ok=True)
        with torch.no_grad():
            ys = model(*args)
        for i, a in enumerate(args):
            t = numpy_helper.from_array(a.numpy(), names[i])
            open(os.path.join(d, "input_%d.pb" % i), "wb").write(t.SerializeToString())
        for i, y in enumerate(ys):
            t = numpy_helper.from_array(y.numpy(), outs[i])
            open(os.path.join(d, "output_%d.pb" % i), "wb").write(t.SerializeToString())


save("masks", Masks(), [(torch.randn(3, 5),), (torch.full((1, 5), -0.1),), (torch.randn(9, 5),)], ["x"],
     ["pos", "idx", "total"], {"x": {0: "N"}})
