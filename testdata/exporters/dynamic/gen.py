# Regenerates the exports in this folder: /usr/bin/python3 gen.py
# PyTorch 1.13 traces with dynamic axes whose ops take sizes from those
# axes: argsort and sort (TopK with K = the axis' size), topk of half the
# axis, a reflect pad over dynamic H and W, and an FPN-style top-down
# path: F.interpolate to another feature map's size (nearest, bilinear
# with and without align_corners, bicubic) and by a scale of 1.5.
# test_data_set_K holds
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


save("sorts", Sorts(), [(torch.randn(n, s),) for n, s in ((2, 7), (1, 2), (3, 30))], ["x"],
     ["order", "sorted", "top_half"], {"x": {0: "N", 1: "S"}})
save("reflect_pad", ReflectPad(), [(torch.randn(1, 2, h, w),) for h, w in ((6, 6), (4, 9), (16, 12))], ["x"],
     ["y"], {"x": {2: "H", 3: "W"}})
save("interpolate", Interpolate().eval(), [(torch.randn(n, 3, h, w),) for n, h, w in ((1, 9, 12), (2, 5, 5), (1, 16, 7))], ["x"],
     ["top", "corners_plus_cubic", "by_1_5"], {"x": {0: "N", 2: "H", 3: "W"}})
