"""Forked sender processes for the load benchmarks: started at once, released together."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any

__all__ = ["start_senders"]


def start_senders(
    target: Callable[..., None], count: int, *args: Any
) -> tuple[Any, Any, list[BaseProcess]]:
    """``count`` processes running ``target(index, *args, go, results)``, started.

    Each waits for the event ``go`` (so that building its data is not timed) and puts
    what it measured on the queue ``results``; returns ``go``, ``results`` and the processes.
    """
    ctx = mp.get_context("fork")
    go, results = ctx.Event(), ctx.Queue()
    processes = [ctx.Process(target=target, args=(i, *args, go, results)) for i in range(count)]
    for process in processes:
        process.start()
    return go, results, processes
