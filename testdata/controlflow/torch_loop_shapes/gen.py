# Regenerate with /usr/bin/python3 gen.py (PyTorch 1.13) in this folder. The batch
# dim is dynamic, so that the exporter keeps the Shape ops in the body.
import torch, onnx, os
from onnx import numpy_helper

class LoopShapes(torch.nn.Module):
    # Shape ops inside a loop body: x.view(x.size(0), -1) on the loop-
    # invariant input, and y.view(y.size(0), -1) on a carried value
    # whose shape stays [2, 3, 4].
    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        y = x
        acc = torch.zeros(x.size(0), x.size(1) * x.size(2))
        for i in range(int(n)):
            flat = y.view(y.size(0), -1)
            acc = acc + torch.tanh(flat) * float(i + 1) + x.view(x.size(0), -1)
            y = torch.sin(y) + x
        return acc

torch.manual_seed(0)
m = torch.jit.script(LoopShapes())
x = torch.randn(2, 3, 4)
n = torch.tensor(3, dtype=torch.int64)
out = m(x, n)
torch.onnx.export(m, (x, n), "model.onnx", opset_version=13, input_names=["x", "n"], output_names=["acc"], dynamic_axes={"x": {0: "batch"}, "acc": {0: "batch"}})
os.makedirs("test_data_set_0", exist_ok=True)
for i, (name, t) in enumerate([("x", x), ("n", n)]):
    open(f"test_data_set_0/input_{i}.pb", "wb").write(numpy_helper.from_array(t.numpy(), name).SerializeToString())
open("test_data_set_0/output_0.pb", "wb").write(numpy_helper.from_array(out.detach().numpy(), "acc").SerializeToString())
mo = onnx.load("model.onnx")
print([nd.op_type for nd in mo.graph.node])
for nd in mo.graph.node:
    if nd.op_type == "Loop":
        print([b.op_type for b in nd.attribute[0].g.node])
