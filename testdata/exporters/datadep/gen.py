# Regenerates the exports in this folder: /usr/bin/python3 gen.py
# Models whose output shapes the data decides (NonZero, boolean masks),
# traced by PyTorch 1.13 at opset 17 with a dynamic batch; test_data_set_K
# holds PyTorch's outputs at a different batch and count each (one with no
# element selected).
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from export_sets import save  # noqa: E402

import torch

torch.manual_seed(0)


class Masks(torch.nn.Module):
    """x[x > 0.3] (NonZero, Transpose, GatherND), torch.nonzero, and a
    reduction over the selection."""

    def forward(self, x):
        pos = x[x > 0.3]
        idx = torch.nonzero(x < -0.5)
        return pos * 2.0, idx, pos.sum().unsqueeze(0)


save("masks", Masks(), [(torch.randn(3, 5),), (torch.full((1, 5), -0.1),), (torch.randn(9, 5),)], ["x"],
     ["pos", "idx", "total"], {"x": {0: "N"}})
