"""What the optimizer sees of a step: the gradient norm, the learning rates, the update size."""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["Labelled", "grad_norm", "learning_rates", "snapshot", "trainable", "update_ratio"]

LR = "train.lr"

#: Samples that need their own labels: ``[(values, labels), ...]``.
Labelled = list[tuple[dict[str, object], dict[str, object]]]


def trainable(optimizers: Iterable[torch.optim.Optimizer]) -> list[torch.Tensor]:
    """The parameters the optimizers update (those that take gradients)."""
    return [
        p
        for opt in optimizers
        for group in opt.param_groups
        for p in group["params"]
        if p.requires_grad
    ]


def grad_norm(params: Iterable[torch.Tensor]) -> torch.Tensor:
    """Global L2 norm of the gradients, computed as ``clip_grad_norm_`` does (one foreach pass)."""
    return torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])


def learning_rates(
    optimizers: Iterable[torch.optim.Optimizer],
) -> tuple[dict[str, object], Labelled]:
    """``train.lr`` for a single param group, else one ``train.lr`` per group labelled ``group``."""
    groups = [group for opt in optimizers for group in opt.param_groups]
    if len(groups) == 1:
        return {LR: groups[0]["lr"]}, []
    return {}, [({LR: group["lr"]}, {"group": i}) for i, group in enumerate(groups)]


@torch.no_grad()
def snapshot(params: Iterable[torch.Tensor]) -> list[torch.Tensor]:
    """A copy of the parameters before a step (costs their memory once, on ratio steps only)."""
    return [p.detach().clone() for p in params]


@torch.no_grad()
def update_ratio(params: list[torch.Tensor], before: list[torch.Tensor]) -> torch.Tensor:
    """Norm of the step's parameter update over the norm of the parameters after it."""
    after = [p.detach() for p in params]
    update = torch._foreach_sub(after, before)
    return torch.nn.utils.get_total_norm(update) / torch.nn.utils.get_total_norm(after)
