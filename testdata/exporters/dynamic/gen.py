# Regenerates the exports in this folder: /usr/bin/python3 gen.py
# PyTorch 1.13 traces with dynamic axes whose ops take sizes from those
# axes: argsort and sort (TopK with K = the axis' size), topk of half the
# axis, a reflect pad over dynamic H and W, and an FPN-style top-down
# path: F.interpolate to another feature map's size (nearest, bilinear
# with and without align_corners, bicubic) and by a scale of 1.5.
# A CRNN text recognizer over a dynamic width (its reshape to
# [N, W//2, C·H] and a bidirectional LSTM over W//2), and a transformer
# encoder over a dynamic length whose positional table is sliced to it
# (pe[:, :T]) and whose padding mask is built from lengths.
# test_data_set_K holds
# PyTorch's outputs at a different size each.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from export_sets import save  # noqa: E402

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Sorts(torch.nn.Module):
    def forward(self, x):
        return torch.argsort(x, dim=1), torch.sort(x, dim=1, descending=True)[0], torch.topk(x, x.size(1) // 2, dim=1)[0]


class ReflectPad(torch.nn.Module):
    def forward(self, x):
        return F.pad(x, (1, 2, 0, 3), mode="reflect") * 2.0


class Interpolate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.down = torch.nn.Conv2d(4, 4, 3, stride=2, padding=1)
        self.lateral = torch.nn.Conv2d(4, 4, 1)

    def forward(self, x):
        a = torch.relu(self.stem(x))
        b = torch.relu(self.down(a))
        size = a.shape[2:]
        top = self.lateral(a) + F.interpolate(b, size=size, mode="nearest")
        smooth = F.interpolate(b, size=size, mode="bilinear", align_corners=False)
        corners = F.interpolate(b, size=size, mode="bilinear", align_corners=True)
        cubic = F.interpolate(b, size=size, mode="bicubic", align_corners=False)
        return top + smooth, corners + cubic, F.interpolate(a, scale_factor=1.5, mode="bilinear")


class CRNN(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(1, 8, 3, padding=1); s.c2 = nn.Conv2d(8, 16, 3, padding=1)
        s.bn = nn.BatchNorm2d(16); s.rnn = nn.LSTM(16 * 8, 32, bidirectional=True, batch_first=True); s.fc = nn.Linear(64, 11)
    def forward(s, x):
        y = F.max_pool2d(torch.relu(s.c1(x)), 2)
        y = F.max_pool2d(torch.relu(s.bn(s.c2(y))), (2, 1))
        b, c, h, w = y.shape
        y = y.permute(0, 3, 1, 2).reshape(b, w, c * h)
        y, _ = s.rnn(y)
        return F.log_softmax(s.fc(y), dim=-1)

class Enc(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(50, 32); s.pe = nn.Parameter(torch.randn(1, 256, 32) * 0.1)
        l = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0)  # not batch_first: no fast path, whose padded rows are 0
        s.enc = nn.TransformerEncoder(l, 2); s.out = nn.Linear(32, 5)
    def forward(s, ids, lengths):
        x = s.emb(ids) + s.pe[:, : ids.size(1)]
        mask = torch.arange(ids.size(1)).unsqueeze(0) >= lengths.unsqueeze(1)
        y = s.enc(x.transpose(0, 1), src_key_padding_mask=mask)
        return s.out(y.mean(dim=0))


# /usr/bin/python3 gen.py --bench DIR writes the interpolate, crnn and
# encoder models to DIR instead, one test_data_set_0 each at the sizes
# docs/benchmarks.md times (their weights differ from this folder's).
BENCH = len(sys.argv) == 3 and sys.argv[1] == "--bench"
if BENCH:
    os.makedirs(sys.argv[2], exist_ok=True)
    os.chdir(sys.argv[2])
    save("interpolate", Interpolate().eval(), [(torch.randn(1, 3, 224, 224),)], ["x"],
         ["top", "corners_plus_cubic", "by_1_5"], {"x": {0: "N", 2: "H", 3: "W"}})
    save("crnn", CRNN().eval(), [(torch.randn(1, 1, 32, 160),)], ["x"], ["y"], {"x": {0: "N", 3: "W"}})
    save("encoder", Enc().eval(), [(torch.randint(0, 50, (4, 128)), torch.tensor([128, 100, 64, 32]))], ["ids", "lengths"], ["y"],
         {"ids": {0: "N", 1: "T"}, "lengths": {0: "N"}})
    sys.exit(0)

save("sorts", Sorts(), [(torch.randn(n, s),) for n, s in ((2, 7), (1, 2), (3, 30))], ["x"],
     ["order", "sorted", "top_half"], {"x": {0: "N", 1: "S"}})
save("reflect_pad", ReflectPad(), [(torch.randn(1, 2, h, w),) for h, w in ((6, 6), (4, 9), (16, 12))], ["x"],
     ["y"], {"x": {2: "H", 3: "W"}})
save("interpolate", Interpolate().eval(), [(torch.randn(n, 3, h, w),) for n, h, w in ((1, 9, 12), (2, 5, 5), (1, 16, 7))], ["x"],
     ["top", "corners_plus_cubic", "by_1_5"], {"x": {0: "N", 2: "H", 3: "W"}})
save("crnn", CRNN().eval(), [(torch.randn(n, 1, 32, w),) for n, w in ((1, 20), (4, 8), (2, 32))], ["x"], ["y"], {"x": {0: "N", 3: "W"}})
save("encoder", Enc().eval(), [(torch.randint(0, 50, (n, t)), torch.tensor([t] + [max(1, t // 2)] * (n - 1))) for n, t in ((1, 16), (4, 4), (2, 31))],
     ["ids", "lengths"], ["y"], {"ids": {0: "N", 1: "T"}, "lengths": {0: "N"}})
