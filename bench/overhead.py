"""What watching costs a real training loop: step-time overhead, and the agent's CPU and memory.

Run: python bench/overhead.py [--rounds 8] [--steps 200] [--threads 1]
Alternates blocks of the same CPU training (a 4-layer MLP, PyTorch) without
and with full monitoring (stepwatch.init + stepwatch.torch.watch + a
`stepwatch agent` at 1 s beside it, shipping to a collector), each block a
fresh process, and prints the median step time of each mode, the relative
overhead with its spread over rounds, and the agent's CPU (% of one core)
and RSS. The collector runs in its own process, as it would on another machine.
Then, since whole blocks drift by more than 1 % on a shared machine, one
process alternates blocks of 10 steps with and without watch() + log and
prints the per-step cost that remains.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

WARMUP_STEPS = 20
#: Steps per block of the in-process interleaved comparison.
COST_BLOCK = 10
#: Seconds between blocks, for the collector to settle.
SETTLE_S = 3.0
BATCH, WIDTH, DEPTH = 64, 1024, 4


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _training(threads: int) -> tuple[Any, Any, Callable[[int], float]]:
    """The model, its optimizer, and one training step (returns the loss)."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(DEPTH):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(WIDTH, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = [(torch.randn(BATCH, WIDTH), torch.randint(0, 10, (BATCH,))) for _ in range(8)]

    def step(i: int) -> float:
        x, y = data[i % len(data)]
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return float(loss.item())

    return model, opt, step


def worker(mode: str, steps: int, threads: int) -> None:
    """One block of training; prints its per-step wall times (after warm-up) as JSON."""
    import stepwatch
    from stepwatch.torch import watch

    model, opt, train_step = _training(threads)
    run = stepwatch.init(project="bench-overhead") if mode == "full" else None
    watcher = watch(model, opt, run, tokens_per_step=BATCH) if run is not None else None
    times = []
    for i in range(WARMUP_STEPS + steps):
        t0 = time.perf_counter()
        loss = train_step(i)
        if run is not None:
            run.log({"loss": loss}, step=i)
        times.append(time.perf_counter() - t0)
    if watcher is not None and run is not None:
        watcher.close()
        run.finish()
    print(json.dumps(times[WARMUP_STEPS:]))


def cost_worker(steps: int, threads: int) -> None:
    """In one process, short blocks with and without watch() + log, interleaved: prints the
    median step time of each (JSON), so slow drifts of a noisy machine hit both alike."""
    import stepwatch
    from stepwatch.torch import watch

    model, opt, train_step = _training(threads)
    run = stepwatch.init(project="bench-overhead")
    for i in range(WARMUP_STEPS):
        train_step(i)
    times: dict[str, list[float]] = {"bare": [], "watched": []}
    i = 0
    for block in range(max(1, steps // COST_BLOCK)):
        order = list(times.items()) if block % 2 == 0 else list(times.items())[::-1]
        for mode, samples in order:
            watcher = watch(model, opt, run, tokens_per_step=BATCH) if mode == "watched" else None
            for _ in range(COST_BLOCK):
                t0 = time.perf_counter()
                loss = train_step(i)
                if watcher is not None:
                    run.log({"loss": loss}, step=i)
                samples.append(time.perf_counter() - t0)
                i += 1
            if watcher is not None:
                watcher.close()
    run.finish()
    print(json.dumps({mode: statistics.median(samples) for mode, samples in times.items()}))


def _block(mode: str, args: argparse.Namespace, env: dict[str, str]) -> tuple[float, dict]:
    """Median step time of one worker process, plus the agent's usage when monitoring."""
    agent = None
    if mode == "full":
        agent = subprocess.Popen(
            [sys.executable, "-m", "stepwatch.cli", "agent", "--interval", "1", "--gpu", "none"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(2.0)  # past its start-up, as a long-running agent would be
    proc = psutil.Process(agent.pid) if agent else None
    cpu0 = sum(proc.cpu_times()[:2]) if proc else 0.0
    wall0 = time.monotonic()
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            mode,
            "--steps",
            str(args.steps),
            "--threads",
            str(args.threads),
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    usage = {}
    if agent is not None and proc is not None:
        wall = time.monotonic() - wall0
        usage = {
            "cpu_pct": 100 * (sum(proc.cpu_times()[:2]) - cpu0) / wall,
            "rss_mb": proc.memory_info().rss / 2**20,
        }
        agent.terminate()
        agent.wait(30)
    return statistics.median(json.loads(out)), usage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the training")
    parser.add_argument("--worker", choices=["bare", "full", "cost"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "cost":
        cost_worker(args.steps * args.rounds, args.threads)
        return
    if args.worker:
        worker(args.worker, args.steps, args.threads)
        return
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        collector = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "stepwatch.server",
                "--store",
                f"{tmp}/bench.duckdb",
                "--port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url)
            env = {
                **os.environ,
                "STEPWATCH_SERVER": url,
                "STEPWATCH_DIR": str(Path(tmp) / "spool"),
                "STEPWATCH_RUN_ID": "bench-overhead",
            }
            rounds = [_round(args, env, i) for i in range(args.rounds)]
            cost = _cost(args, env)
            _report(args, rounds, cost)
        finally:
            collector.terminate()
            collector.wait(30)


def _round(args: argparse.Namespace, env: dict[str, str], index: int) -> tuple[float, float, dict]:
    """One bare and one full block, in alternating order (ABBA), each after a pause that lets
    the collector finish with the previous block's data."""
    results: dict[str, tuple[float, dict]] = {}
    for mode in ("bare", "full") if index % 2 == 0 else ("full", "bare"):
        time.sleep(SETTLE_S)
        results[mode] = _block(mode, args, env)
    (bare, _), (full, usage) = results["bare"], results["full"]
    print(
        f"  round: bare {bare * 1e3:.2f} ms  full {full * 1e3:.2f} ms  "
        f"overhead {100 * (full / bare - 1):+.2f}%  agent {usage['cpu_pct']:.2f}% "
        f"{usage['rss_mb']:.0f} MB",
        flush=True,
    )
    return bare, full, usage


def _cost(args: argparse.Namespace, env: dict[str, str]) -> dict[str, float]:
    command = [sys.executable, __file__, "--worker", "cost", "--steps", str(args.steps)]
    command += ["--rounds", str(args.rounds), "--threads", str(args.threads)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def _report(
    args: argparse.Namespace, rounds: list[tuple[float, float, dict]], cost: dict[str, float]
) -> None:
    overheads = [100 * (full / bare - 1) for bare, full, _ in rounds]
    bare = statistics.median(r[0] for r in rounds)
    full = statistics.median(r[1] for r in rounds)
    cpu = [r[2]["cpu_pct"] for r in rounds]
    rss = [r[2]["rss_mb"] for r in rounds]
    print(
        f"\nCPU training, {BATCH}x{WIDTH} MLP x{DEPTH}, torch threads {args.threads}, "
        f"{args.rounds} rounds of {args.steps} steps per mode"
    )
    print(f"{'':28} {'median':>9}")
    print(f"{'step time, bare':28} {bare * 1e3:8.2f} ms")
    print(f"{'step time, full monitoring':28} {full * 1e3:8.2f} ms")
    print(
        f"{'step-time overhead':28} {statistics.median(overheads):+8.2f} %  "
        f"(rounds {min(overheads):+.2f} .. {max(overheads):+.2f})   target <= 1 %"
    )
    extra = cost["watched"] - cost["bare"]
    print(
        f"{'in-process, interleaved':28} bare {cost['bare'] * 1e3:.2f} ms, watched "
        f"{cost['watched'] * 1e3:.2f} ms: {extra * 1e6:+.0f} us/step = "
        f"{100 * extra / cost['bare']:+.2f} %   (blocks of {COST_BLOCK} steps)"
    )
    print(
        f"{'agent CPU (1 s sampling)':28} {statistics.median(cpu):8.2f} % of a core  "
        f"(max {max(cpu):.2f})   target <= 2 %"
    )
    print(
        f"{'agent RSS':28} {statistics.median(rss):8.1f} MB  (max {max(rss):.1f})   target <= 60 MB"
    )


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).is_success:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"collector at {url} did not start")


if __name__ == "__main__":
    main()
