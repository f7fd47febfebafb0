# Regenerates the exports in this folder: /usr/bin/python3 gen.py
# PyTorch 1.13 traces with dynamic axes whose ops take sizes from those
# axes: argsort and sort (TopK with K = the axis' size), topk of half the
# axis, a reflect pad over dynamic H and W. test_data_set_K holds
# PyTorch's outputs at a different size each.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from export_sets import save  # noqa: E402

import torch
import torch.nn.functional as F

torch.manual_seed(0)


class Sorts(torch.nn.Module):
    def forward(self, x):
        return torch.argsort(x, dim=1), torch.sort(x, dim=1, descending=True)[0], torch.topk(x, x.size(1) // 2, dim=1)[0]


class ReflectPad(torch.nn.Module):
    def forward(self, x):
        return F.pad(x, (1, 2, 0, 3), mode="reflect") * 2.0


save("sorts", Sorts(), [(torch.randn(n, s),) for n, s in ((2, 7), (1, 2), (3, 30))], ["x"],
     ["order", "sorted", "top_half"], {"x": {0: "N", 1: "S"}})
save("reflect_pad", ReflectPad(), [(torch.randn(1, 2, h, w),) for h, w in ((6, 6), (4, 9), (16, 12))], ["x"],
     ["y"], {"x": {2: "H", 3: "W"}})
