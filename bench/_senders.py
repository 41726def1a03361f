"""Forked sender processes for the load benchmarks: started at once, released together; and
the load most of them send, a training's metrics of many runs."""

from __future__ import annotations

import http.client
import json
import multiprocessing as mp
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any

import numpy as np

from stepwatch.wire import BINARY_CONTENT_TYPE, encode

__all__ = ["Load", "Sent", "post_training", "register_runs", "start_senders"]


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


@dataclass(frozen=True)
class Load:
    """``runs`` running runs' loss, rate and step time, shared by ``senders``, ``steps`` of
    each a batch, for ``seconds``; step s at data time ``t0 + s * step_s``."""

    runs: int
    senders: int
    steps: int
    seconds: float
    t0: float
    step_s: float


@dataclass
class Sent:
    """What one sender got acknowledged."""

    samples: int
    end: float


def register_runs(port: int, runs: int, start: float, planned: int) -> None:
    """The runs ``run0``... of project ``bench``, running, each with a plan."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for r in range(runs):
        doc = {"id": f"run{r}", "project": "bench", "planned_total_steps": planned, "start": start}
        conn.request("POST", "/api/v1/runs", body=json.dumps(doc),
                     headers={"Content-Type": "application/json"})  # fmt: skip
        response = conn.getresponse()
        response.read()
        assert response.status < 300, response.status
    conn.close()


def post_training(index: int, port: int, load: Load, go: Any, results: Any) -> None:
    """Post batches of the next ``load.steps`` steps of this sender's runs until time is up."""
    runs = [r for r in range(load.runs) if r % load.senders == index]
    names = ("train.loss", "train.lr", "train.step_time_s")
    keys = [(n, {"run": f"run{r}", "rank": "0"}) for r in runs for n in names]
    k, n = len(keys), load.steps
    series = np.tile(np.arange(k, dtype=np.uint32), n)
    rng = np.random.default_rng(index)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": BINARY_CONTENT_TYPE}
    sent = Sent(0, 0.0)
    go.wait()
    deadline = time.monotonic() + load.seconds
    seq = 0
    while time.monotonic() < deadline:
        seq += 1
        step = np.repeat(np.arange((seq - 1) * n, seq * n, dtype=np.int64), k)
        ts = load.t0 + step * load.step_s
        value = 2.0 + 3.0 * (step + 10.0) ** -0.3 + rng.normal(0, 0.01, n * k)
        frame = encode(f"sender{index}", seq, keys, value, ts, step, series)
        conn.request("POST", "/api/v1/ingest", body=frame, headers=headers)
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise SystemExit(f"sender {index}: HTTP {response.status}: {body[:200]!r}")
        sent.samples += n * k if json.loads(body)["applied"] else 0
    sent.end = time.monotonic()
    conn.close()
    results.put(sent)
