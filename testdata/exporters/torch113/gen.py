# Regenerates the PyTorch 1.13 exports in this folder (model.onnx and
# test_data_set_0 with PyTorch's outputs): /usr/bin/python3 gen.py
# Control flow comes from torch.jit.script (If, Loop); the others are
# traced at opset 17 with dynamic axes.
import os
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))

class IfNet(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.fc = torch.nn.Linear(8, 8)
    def forward(s, x):
        y = s.fc(x)
        if y.sum() > 0:
            z = torch.relu(y) * 2.0
        else:
            z = y - 1.0
        return z + x

class LoopNet(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.fc = torch.nn.Linear(8, 8)
    def forward(s, x, n: int):
        h = x
        for i in range(n):
            h = torch.tanh(s.fc(h)) + h
        return h

class WhileNet(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.fc = torch.nn.Linear(8, 8)
    def forward(s, x):
        h = x
        i = 0
        while h.abs().sum() < 100.0 and i < 20:
            h = s.fc(h) * 1.5 + 0.1
            i += 1
        return h

class Enc(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(100, 32)
        l = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, activation="gelu")
        s.enc = nn.TransformerEncoder(l, 2)
        s.head = nn.Linear(32, 5)
    def forward(s, ids):
        h = s.enc(s.emb(ids))
        return s.head(h.mean(1))

class RNN(nn.Module):
    def __init__(s):
        super().__init__(); s.lstm = nn.LSTM(16, 24, 2, batch_first=True, bidirectional=True); s.gru = nn.GRU(48, 12, batch_first=True)
    def forward(s, x):
        y, _ = s.lstm(x); z, h = s.gru(y)
        return z[:, -1] + h[0]

class Vision(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 16, 3, padding=1); s.gn = nn.GroupNorm(4, 16); s.inn = nn.InstanceNorm2d(16, affine=True)
        s.c2 = nn.Conv2d(16, 32, 3, stride=2, padding=1); s.ps = nn.PixelShuffle(2); s.c3 = nn.Conv2d(8, 4, 1)
    def forward(s, x):
        h = F.silu(s.gn(s.c1(x)))
        h = F.hardswish(s.inn(h))
        h = s.ps(F.gelu(s.c2(h), approximate="tanh"))
        h = F.interpolate(s.c3(h), scale_factor=2, mode="bilinear", align_corners=False)
        return F.adaptive_avg_pool2d(h, 1).flatten(1)

class Attn(nn.Module):
    def __init__(s):
        super().__init__(); s.mha = nn.MultiheadAttention(32, 4, batch_first=True); s.w = nn.Parameter(torch.randn(32, 8))
    def forward(s, x, mask):
        y, _ = s.mha(x, x, x, key_padding_mask=mask)
        return torch.einsum("bsd,de->bse", y, s.w).softmax(-1)

class Text(nn.Module):
    def __init__(s):
        super().__init__(); s.emb = nn.Embedding(50, 8); s.fc = nn.Linear(8, 50)
    def forward(s, ids):
        e = s.emb(ids).cumsum(1)
        logits = s.fc(e)
        top, idx = logits.topk(3, dim=-1)
        return top, idx, logits.argmax(-1)

def save(name, model, args, names, dyn=None, opset=17, script=False):
    d = os.path.join(HERE, name); os.makedirs(d + "/test_data_set_0", exist_ok=True)
    model.eval()
    if script:
        model = torch.jit.script(model)
    with torch.no_grad():
        out = model(*args)
    if not isinstance(out, tuple): out = (out,)
    onames = [f"out{i}" for i in range(len(out))]
    torch.onnx.export(model, args, d + "/model.onnx", input_names=names, output_names=onames, opset_version=opset, dynamic_axes=dyn)
    for k, (nm, a) in enumerate(zip(names, args)):
        arr = a.numpy() if torch.is_tensor(a) else np.array(a, dtype=np.int64)
        open(f"{d}/test_data_set_0/input_{k}.pb", "wb").write(numpy_helper.from_array(arr, nm).SerializeToString())
    for k, o in enumerate(out):
        open(f"{d}/test_data_set_0/output_{k}.pb", "wb").write(numpy_helper.from_array(o.numpy(), onames[k]).SerializeToString())
    print("saved", name)

torch.manual_seed(0)
save("if_pos", IfNet(), (torch.randn(2, 8),), ["x"], opset=13, script=True)
torch.manual_seed(1)
save("if_neg", IfNet(), (torch.randn(2, 8),), ["x"], opset=13, script=True)
save("loop", LoopNet(), (torch.randn(2, 8), 5), ["x", "n"], opset=13, script=True)
save("while", WhileNet(), (torch.randn(2, 8),), ["x"], opset=13, script=True)
torch.manual_seed(0)
save("encoder", Enc(), (torch.randint(0, 100, (2, 10)),), ["ids"], {"ids": {0: "N", 1: "S"}})
save("lstm_gru", RNN(), (torch.randn(2, 7, 16),), ["x"], {"x": {0: "N", 1: "T"}})
save("vision", Vision(), (torch.randn(1, 3, 32, 32),), ["x"], {"x": {0: "N", 2: "H", 3: "W"}})
m = torch.zeros(2, 6, dtype=torch.bool); m[1, 4:] = True
save("attention", Attn(), (torch.randn(2, 6, 32), m), ["x", "mask"], {"x": {0: "N", 1: "S"}, "mask": {0: "N", 1: "S"}})
save("text", Text(), (torch.randint(0, 50, (2, 9)),), ["ids"], {"ids": {0: "N", 1: "S"}})
