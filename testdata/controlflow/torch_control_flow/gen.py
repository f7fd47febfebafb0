import torch, onnx, os
from onnx import numpy_helper

class ControlFlow(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        y = x
        if bool(x.sum() > 0):
            y = y * 2.0
        else:
            y = y - 1.0
        for i in range(int(n)):
            y = torch.tanh(y) + x * float(i)
        return y

torch.manual_seed(0)
m = torch.jit.script(ControlFlow())
x = torch.randn(2, 3)
n = torch.tensor(3, dtype=torch.int64)
out = m(x, n)
d = "torch_control_flow"
os.makedirs(d + "/test_data_set_0", exist_ok=True)
torch.onnx.export(m, (x, n), d + "/model.onnx", opset_version=13, input_names=["x", "n"], output_names=["y"])
for i, t in enumerate([x, n]):
    open(f"{d}/test_data_set_0/input_{i}.pb", "wb").write(numpy_helper.from_array(t.numpy(), ["x", "n"][i]).SerializeToString())
open(f"{d}/test_data_set_0/output_0.pb", "wb").write(numpy_helper.from_array(out.detach().numpy(), "y").SerializeToString())
# a second case: negative sum takes the else branch, zero iterations
x2 = -x.abs() - 0.1
n2 = torch.tensor(0, dtype=torch.int64)
os.makedirs(d + "/test_data_set_1", exist_ok=True)
for i, t in enumerate([x2, n2]):
    open(f"{d}/test_data_set_1/input_{i}.pb", "wb").write(numpy_helper.from_array(t.numpy(), ["x", "n"][i]).SerializeToString())
open(f"{d}/test_data_set_1/output_0.pb", "wb").write(numpy_helper.from_array(m(x2, n2).detach().numpy(), "y").SerializeToString())
mo = onnx.load(d + "/model.onnx")
print([nd.op_type for nd in mo.graph.node])
