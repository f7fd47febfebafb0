# Regenerates the PyTorch 1.13 exports in this folder (model.onnx and
# test_data_set_0, 1, ... with PyTorch's outputs): /usr/bin/python3 gen.py
# (Debian's python3-torch and python3-onnx). Control flow comes from
# torch.jit.script (If, Loop); the others are traced at opset 17 with
# dynamic axes, but conv9 at opset 9. ort_sets.js runs them in ONNX Runtime.
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

class Converge(nn.Module):
    # A fixed-point iteration run until its step is shorter than tol, at most
    # max_iter times (both input tensors): the Loop's trip count, returned as
    # steps, depends on the input's values.
    def __init__(s):
        super().__init__(); s.fc = nn.Linear(8, 8)
    def forward(s, x, tol, max_iter):
        h = x
        steps = torch.zeros((), dtype=torch.long)
        step = tol + 1.0
        while bool(steps < max_iter) and bool(step > tol):
            nxt = 0.6 * torch.tanh(s.fc(h)) + 0.4 * x
            step = (nxt - h).pow(2).sum().sqrt()
            h = nxt
            steps = steps + 1
        return h, steps

class Stream(nn.Module):
    # A streaming voice detector shaped like Silero VAD: a chunk of 512
    # samples through a front-end whose kernel and stride follow the int64
    # sample rate sr (an If: 31 frames at 16 kHz, 63 at 8 kHz, each branch
    # pooling over time to [1, 24]), then an LSTM cell whose state [2, 1, 32]
    # (h, c) the caller feeds back from one chunk to the next. The chunk is
    # static, so that it builds with no flags (a dynamic one takes 1 to 32
    # samples unless cc build --max widens it).
    def __init__(s):
        super().__init__()
        s.fe16 = nn.Conv1d(1, 16, 32, stride=16); s.fe8 = nn.Conv1d(1, 16, 16, stride=8)
        s.enc = nn.Conv1d(16, 24, 3, padding=1); s.cell = nn.LSTMCell(24, 32); s.head = nn.Linear(32, 1)
    def features(s, f):
        return F.relu(s.enc(F.relu(f))).mean(-1)
    def forward(s, x, state, sr):
        if bool(sr == 16000):
            f = s.features(s.fe16(x.unsqueeze(1)))
        else:
            f = s.features(s.fe8(x.unsqueeze(1)))
        h, c = s.cell(f, (state[0], state[1]))
        return torch.sigmoid(s.head(h)), torch.stack([h, c])

class Conv9(nn.Module):
    # A small CIFAR-sized classifier as old exporters wrote it (opset 9:
    # BatchNormalization, MaxPool, Upsample, Flatten, Gemm, MatMul).
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 16, 3, padding=1); s.b1 = nn.BatchNorm2d(16)
        s.c2 = nn.Conv2d(16, 32, 3, padding=1); s.b2 = nn.BatchNorm2d(32)
        s.c3 = nn.Conv2d(32, 32, 3, padding=1); s.b3 = nn.BatchNorm2d(32)
        s.fc = nn.Linear(32 * 4 * 4, 64); s.w = nn.Parameter(torch.randn(64, 10) / 8)
        for b in (s.b1, s.b2, s.b3):  # trained-looking statistics, not the identity
            b.running_mean.uniform_(-0.3, 0.3); b.running_var.uniform_(0.5, 2.0)
            nn.init.uniform_(b.weight, 0.5, 1.5); nn.init.uniform_(b.bias, -0.2, 0.2)
    def forward(s, x):
        h = F.max_pool2d(F.relu(s.b1(s.c1(x))), 2)
        h = F.max_pool2d(F.relu(s.b2(s.c2(h))), 2)
        h = F.interpolate(h, scale_factor=2.0, mode="nearest")
        h = F.max_pool2d(F.relu(s.b3(s.c3(h))), 4)
        return F.relu(s.fc(h.flatten(1))) @ s.w

def audio(n, sr, k):
    # chunk k of a tone that starts in chunk 2, in noise
    t = (torch.arange(n) + k * n) / sr
    return (0.02 * torch.randn(n) + (k >= 2) * 0.4 * torch.sin(2 * np.pi * 220 * t)).unsqueeze(0).float()

def chunks(n, sr, count):
    # a stream: each chunk after the first takes the previous one's state
    first = (audio(n, sr, 0), torch.zeros(2, 1, 32), torch.tensor(sr))
    return [first] + [lambda a, out, k=k: (audio(n, sr, k), out[1], a[2]) for k in range(1, count)]

def save(name, model, args, names, dyn=None, opset=17, script=False, more=()):
    # more: the inputs of test_data_set_1, 2, ...: a tuple, or a function of
    # the previous set's inputs and outputs (a stream's state fed back).
    d = os.path.join(HERE, name); os.makedirs(d, exist_ok=True)
    model.eval()
    if script:
        model = torch.jit.script(model)
    sets = []
    with torch.no_grad():
        for a in (args,) + tuple(more):
            if callable(a): a = a(*sets[-1])
            out = model(*a)
            sets.append((a, out if isinstance(out, tuple) else (out,)))
    onames = [f"out{i}" for i in range(len(sets[0][1]))]
    torch.onnx.export(model, args, d + "/model.onnx", input_names=names, output_names=onames, opset_version=opset, dynamic_axes=dyn)
    for s, (a, out) in enumerate(sets):
        t = f"{d}/test_data_set_{s}"; os.makedirs(t, exist_ok=True)
        for k, (nm, x) in enumerate(zip(names, a)):
            arr = x.numpy() if torch.is_tensor(x) else np.array(x, dtype=np.int64)
            open(f"{t}/input_{k}.pb", "wb").write(numpy_helper.from_array(arr, nm).SerializeToString())
        for k, o in enumerate(out):
            open(f"{t}/output_{k}.pb", "wb").write(numpy_helper.from_array(o.numpy(), onames[k]).SerializeToString())
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
# The issue 27 must-shows (cmd/cc/torch_must_test.go).
torch.manual_seed(2)
t = torch.tensor
x = torch.randn(2, 8)
save("converge", Converge(), (x, t(1e-4), t(50)), ["x", "tol", "max_iter"], opset=13, script=True,
     more=[(x, t(1e-1), t(50)), (x, t(1e-4), t(3)), (3 * torch.randn(2, 8), t(1e-4), t(50))])
torch.manual_seed(3)
s16, s8 = chunks(512, 16000, 4), chunks(512, 8000, 4)
save("stream", Stream(), s16[0], ["x", "state", "sr"], opset=16, script=True, more=s16[1:] + s8)
torch.manual_seed(4)
save("conv9", Conv9(), (torch.randn(1, 3, 32, 32),), ["x"], opset=9, more=[(torch.randn(1, 3, 32, 32),) for _ in range(3)])
