"""The trainings the forecast bench makes, each a model and a stream of batches:

- ``lm``: a small language model on real text, the bytes of the standard library's Python
  source (an embedding of the last 8 bytes, an MLP, the next byte's cross-entropy). Its loss
  falls as language models' do, fast and then ever slower;
- ``teacher``: an MLP learning the labels a random network draws from its softmax; its loss
  can fall faster late in the run than early on, which no curve of the first part foretells.
"""

from __future__ import annotations

import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from torch import nn

__all__ = ["TASKS", "Task"]

Batch = tuple[torch.Tensor, torch.Tensor]


class Task(Protocol):
    def model(self) -> nn.Module: ...

    def batch(self, n: int, gen: torch.Generator) -> Batch: ...


@dataclass
class CharLM:
    """Next-byte prediction over the standard library's source, from the last ``context``."""

    text: torch.Tensor
    context: int = 8

    @classmethod
    def load(cls, gen: torch.Generator) -> CharLM:
        del gen  # the text is the same for every run; the batches drawn differ
        root = Path(sysconfig.get_paths()["stdlib"])
        data = b"".join(p.read_bytes() for p in sorted(root.glob("*.py")))
        return cls(torch.from_numpy(np.frombuffer(data, np.uint8).astype(np.int64)))

    def model(self) -> nn.Module:
        return nn.Sequential(nn.Embedding(256, 16), nn.Flatten(), nn.Linear(16 * self.context, 256),
                             nn.ReLU(), nn.Linear(256, 256))  # fmt: skip

    def batch(self, n: int, gen: torch.Generator) -> Batch:
        at = torch.randint(0, len(self.text) - self.context - 1, (n,), generator=gen)
        window = self.text[at[:, None] + torch.arange(self.context + 1)]
        return window[:, : self.context], window[:, self.context]


@dataclass
class Teacher:
    """Inputs and labels drawn from a random network's softmax: a loss floor no model passes."""

    net: nn.Module
    dim: int = 32
    classes: int = 10

    @classmethod
    def load(cls, gen: torch.Generator) -> Teacher:
        net = nn.Sequential(nn.Linear(cls.dim, 64), nn.Tanh(), nn.Linear(64, cls.classes))
        with torch.no_grad():
            for p in net.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * 1.5)
        return cls(net)

    def model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(self.dim, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, self.classes))  # fmt: skip

    def batch(self, n: int, gen: torch.Generator) -> Batch:
        x = torch.randn(n, self.dim, generator=gen)
        with torch.no_grad():
            probs = torch.softmax(self.net(x), dim=1)
        return x, torch.multinomial(probs, 1, generator=gen).squeeze(1)


TASKS = {"lm": CharLM.load, "teacher": Teacher.load}
