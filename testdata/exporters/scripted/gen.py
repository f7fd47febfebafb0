# Regenerates the scripted-list exports in this folder: /usr/bin/python3 gen.py
# Each model builds a Python list in a torch.jit.script loop (outs.append)
# and stacks or concatenates it, which PyTorch 1.13 exports as SequenceEmpty,
# a Loop carrying the sequence with SequenceInsert, and ConcatFromSequence.
# The loop runs over a dynamic dim; test_data_set_K holds PyTorch's outputs
# at a different size each.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from export_sets import save  # noqa: E402
from typing import List

import torch

torch.manual_seed(0)


class Lists(torch.nn.Module):
    """stack on axis 0 and 1, cat on axis 0 and 1 of per-step Linear+Relu."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        outs: List[torch.Tensor] = []
        for t in range(x.size(0)):
            outs.append(torch.relu(self.lin(x[t])))
        return torch.stack(outs), torch.stack(outs, 1), torch.cat(outs, 0), torch.cat(outs, 1)


class Cell(torch.nn.Module):
    """An RNN cell unrolled by a loop: the state is carried, each step's
    state appended; returns the stacked states and the last one."""

    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(5, 6)
        self.rec = torch.nn.Linear(6, 6, bias=False)

    def forward(self, x, h):
        outs: List[torch.Tensor] = []
        for t in range(x.size(1)):
            h = torch.tanh(self.inp(x[:, t]) + self.rec(h))
            outs.append(h * 2.0)
        return torch.stack(outs, 1), h


class Branches(torch.nn.Module):
    """A sample-rate If whose branches give different lengths (a front-end
    of stride 4 at 16 kHz, 2 at 8 kHz), pooled over time after it."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv1d(1, 4, 8, stride=4)
        self.b = torch.nn.Conv1d(1, 4, 8, stride=2)

    def forward(self, x, sr):
        if bool(sr == 16000):
            y = self.a(x)
        else:
            y = self.b(x)
        return torch.relu(y).mean(dim=2), y


save("lists", Lists(), [(torch.randn(t, 2, 4),) for t in (5, 1, 12)], ["x"],
     ["stack0", "stack1", "cat0", "cat1"], {"x": {0: "T"}}, script=True)
save("cell", Cell(), [(torch.randn(b, t, 5), torch.randn(b, 6)) for b, t in ((2, 7), (1, 1), (3, 20))],
     ["x", "h0"], ["states", "h"], {"x": {0: "N", 1: "T"}, "h0": {0: "N"}}, script=True)
save("branches", Branches(), [(torch.randn(1, 1, t), torch.tensor(sr)) for t, sr in ((32, 16000), (20, 8000), (16, 16000))],
     ["x", "sr"], ["pooled", "frames"], {"x": {2: "T"}}, script=True)
