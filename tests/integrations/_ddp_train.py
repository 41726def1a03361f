"""A tiny data-parallel training run for torchrun: gloo all-reduce timed by watch().comm()."""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

import stepwatch
from stepwatch.torch import watch


def main(steps: int) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1 + rank)  # each rank its own shard
    run = stepwatch.init(project="ddp", flush_interval_s=0.2)
    with watch(model, optimizer, run, tokens_per_step=8 * world) as watcher:
        for step in range(steps):
            inputs, targets = torch.randn(8, 8, generator=data), torch.randn(8, 1, generator=data)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            with watcher.comm():
                for param in model.parameters():
                    dist.all_reduce(param.grad)
                    param.grad /= world
            optimizer.step()
            if rank == 0:
                run.log({"loss": loss.detach()}, step=step)
    run.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]))
