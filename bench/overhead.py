"""What watching costs a real training loop, resolved to a fraction of 1 %, and where it goes.

Run: python bench/overhead.py [--pairs 400] [--block 4] [--threads 1] [--seed 0] [--breakdown]

Overhead: one training process (a 4-layer MLP on the CPU, PyTorch) alternates short
blocks of steps without and with full monitoring (``stepwatch.torch.watch`` plus
``run.log`` of the loss, shipping to a collector in its own process, with a
``stepwatch agent`` at 1 s beside it), the order drawn at random in each pair of
blocks, so that drifts of a shared machine hit both modes alike. Each step reads the
wall clock and the training thread's CPU time; the overhead is the Hodges-Lehmann
estimate of the pairs' differences (watched - bare), in us per step and in % of the
bare step, with a bootstrap 95 % interval. Then the CPU of the trainer's other threads
(the run's flush and send threads), and the agent's CPU and RSS. More ``--pairs``
narrow the interval (as the square root); a busy machine widens it.

Breakdown (``--breakdown`` prints only this, in seconds): each hook's time, read inside
it in the real loop, with their total as a share of the step (its interval is tight:
no difference of two noisy step times); what torch adds to call a hook at all; and the
whole per-step cost measured on a narrow model of the same shape, whose steps are short
enough to resolve it (with warm caches: after a wide step the same Python code runs
slower, its objects evicted by the optimizer's pass over the weights).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

WARMUP_STEPS = 20
#: Pairs of blocks run first and left out (allocator, caches, the collector's first batches).
WARMUP_PAIRS = 10
BATCH, WIDTH, DEPTH = 64, 1024, 4
#: The breakdown's narrow model: the same layers and parameter tensors, a cheap step.
NARROW = 8
BOOTSTRAP = 1000
#: Watcher methods that torch calls each step, with what each does.
HOOKS = {
    "_on_forward": "forward pre-hook (compute starts)",
    "_on_clip": "clip_grad_norm_ listener (reuse its norm)",
    "_before_step": "optimizer pre-hook (grad norm, lr)",
    "_after_step": "optimizer post-hook (marks, log)",
}

Step = Callable[[int], float]


def _training(threads: int, width: int = WIDTH) -> tuple[Any, Any, Step]:
    """The model, its optimizer, and one training step (returns the loss)."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for i in range(DEPTH):
        layers += [torch.nn.Linear(WIDTH if i == 0 else width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))
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


# --- overhead: interleaved blocks in one training process -----------------------------------


def overhead_worker(pairs: int, block: int, threads: int, seed: int) -> None:
    """Prints, per pair, the mean wall and thread-CPU step time of each mode (JSON, seconds)."""
    import stepwatch
    from stepwatch.torch import watch

    model, opt, train_step = _training(threads)
    run = stepwatch.init(project="bench-overhead")
    for i in range(WARMUP_STEPS):
        train_step(i)
    order = random.Random(seed)
    out: dict[str, list[float]] = {f"{m}_{c}": [] for m in ("bare", "watched") for c in "wc"}
    i = 0
    other0, threads0 = time.process_time() - time.thread_time(), _thread_cpu()
    wall0 = time.perf_counter()
    for pair in range(WARMUP_PAIRS + pairs):
        modes = ["bare", "watched"]
        order.shuffle(modes)
        for mode in modes:
            watcher = watch(model, opt, run, tokens_per_step=BATCH) if mode == "watched" else None
            wall, cpu = [], []
            for _ in range(block):
                t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                loss = train_step(i)
                if watcher is not None:
                    run.log({"loss": loss})
                wall.append((time.perf_counter_ns() - t0) / 1e9)
                cpu.append((time.thread_time_ns() - c0) / 1e9)
                i += 1
            if watcher is not None:
                watcher.close()
            if pair >= WARMUP_PAIRS:
                out[f"{mode}_w"].append(wall)
                out[f"{mode}_c"].append(cpu)
    wall_s = time.perf_counter() - wall0
    other = time.process_time() - time.thread_time() - other0
    threads_cpu = {name: cpu - threads0.get(name, 0.0) for name, cpu in _thread_cpu().items()}
    run.finish()
    print(json.dumps({**out, "other_cpu_s": other, "wall_s": wall_s, "threads_cpu_s": threads_cpu}))


def _thread_cpu() -> dict[str, float]:
    """CPU seconds so far of this process's stepwatch threads, by name less the source id."""
    import threading

    import psutil

    used = {t.id: t.user_time + t.system_time for t in psutil.Process().threads()}
    return {
        "-".join(t.name.split("-")[:2]): used.get(t.native_id or -1, 0.0)
        for t in threading.enumerate()
        if t.name.startswith("stepwatch-")
    }


def _hodges_lehmann(d: Any) -> float:
    """The median of all pairwise means of the differences: robust, and tighter than their
    median when the machine's noise has heavy tails."""
    import numpy as np

    i, j = np.triu_indices(len(d))
    return float(np.median((d[i] + d[j]) / 2))


def _estimate_ci(diffs: list[float], seed: int) -> tuple[float, float, float]:
    """The Hodges-Lehmann estimate of the paired differences and its bootstrap 95 % interval
    (resampling pairs)."""
    import numpy as np

    d = np.asarray(diffs)
    rng = np.random.default_rng(seed)
    boots = [_hodges_lehmann(d[rng.integers(0, len(d), len(d))]) for _ in range(BOOTSTRAP)]
    low, high = np.percentile(boots, [2.5, 97.5])
    return _hodges_lehmann(d), float(low), float(high)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).is_success:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"collector at {url} did not start")


@contextmanager
def _process(command: list[str], env: dict[str, str] | None = None) -> Iterator[int]:
    """A background process for the duration of the block (its pid)."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc.pid
    finally:
        proc.terminate()
        proc.wait(30)


def overhead(args: argparse.Namespace) -> None:
    """Runs the worker beside a collector and an agent; prints the overhead and their usage."""
    import psutil

    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        server = [sys.executable, "-m", "stepwatch.server", "--store", f"{tmp}/bench.duckdb"]
        with _process([*server, "--port", str(port)]):
            _wait_ready(url)
            env = {
                **os.environ,
                "STEPWATCH_SERVER": url,
                "STEPWATCH_DIR": str(Path(tmp) / "spool"),
                "STEPWATCH_RUN_ID": "bench-overhead",
            }
            agent_cmd = [sys.executable, "-m", "stepwatch.cli", "agent", "--interval", "1"]
            with _process([*agent_cmd, "--gpu", "none"], env) as pid:
                time.sleep(2.0)  # past its start-up, as a long-running agent would be
                agent = psutil.Process(pid)
                cpu0, wall0 = sum(agent.cpu_times()[:2]), time.monotonic()
                command = [sys.executable, __file__, "--worker", "overhead"]
                for flag in ("pairs", "block", "threads", "seed"):
                    command += [f"--{flag}", str(getattr(args, flag))]
                done = subprocess.run(command, env=env, check=True, stdout=subprocess.PIPE)
                result = json.loads(done.stdout)
                agent_cpu = 100 * (sum(agent.cpu_times()[:2]) - cpu0) / (time.monotonic() - wall0)
                agent_rss = agent.memory_info().rss / 2**20
    _report_overhead(args, result, agent_cpu, agent_rss)


def _report_overhead(
    args: argparse.Namespace, result: dict[str, Any], agent_cpu: float, agent_rss: float
) -> None:
    print(
        f"CPU training, {BATCH}x{WIDTH} MLP x{DEPTH}, AdamW, clip_grad_norm_, torch threads "
        f"{args.threads}: {args.pairs} pairs of {args.block}-step blocks, order random per pair"
    )
    print(f"{'per step (median)':30} {'bare':>9} {'watched':>9}   overhead: paired differences")
    halves = {}
    for kind, label in (("w", "wall time"), ("c", "training thread CPU")):
        bare, watched = result[f"bare_{kind}"], result[f"watched_{kind}"]
        pairs = zip(bare, watched, strict=True)
        diffs = [statistics.fmean(w) - statistics.fmean(b) for b, w in pairs]
        mid, low, high = _estimate_ci(diffs, args.seed)
        base = statistics.median(x for block in bare for x in block)
        top = statistics.median(x for block in watched for x in block)
        pct = [100 * x / base for x in (mid, low, high)]
        halves[label] = (pct[2] - pct[1]) / 2
        print(
            f"{label:30} {base * 1e3:6.2f} ms {top * 1e3:6.2f} ms   {mid * 1e6:+6.0f} us = "
            f"{pct[0]:+.2f} %  (95 % CI {pct[1]:+.2f} .. {pct[2]:+.2f} %)"
        )
    resolved = [label for label, half in halves.items() if half < 1.0] or ["neither"]
    widths = ", ".join(f"{label} +-{half:.2f} %" for label, half in halves.items())
    print(f"{'CI narrower than +-1 %':30} {' and '.join(resolved)}  ({widths}; --pairs narrows it)")
    steps = 2 * args.pairs * args.block
    print(f"{'other threads of the trainer':30} CPU over the run (both modes)")
    for name, cpu in [*result["threads_cpu_s"].items(), ("all", result["other_cpu_s"])]:
        print(
            f"  {name:28} {100 * cpu / result['wall_s']:6.2f} % of a core = "
            f"{cpu / steps * 1e6:5.0f} us per step"
        )
    print(
        f"{'agent (1 s sampling)':30} {agent_cpu:6.2f} % of a core   target <= 2 %\n"
        f"{'agent RSS':30} {agent_rss:6.1f} MB          target <= 60 MB"
    )


# --- breakdown: where the per-step cost goes ------------------------------------------------


def _instrument(spent: dict[str, list[int]]) -> Callable[[], None]:
    """Times every call of the Watcher's hooks into ``spent``; returns the undo."""
    from stepwatch.torch import Watcher

    originals = {name: getattr(Watcher, name) for name in HOOKS}
    for name, fn in originals.items():
        times = spent[name] = []

        def timed(self: Any, *args: Any, _fn: Any = fn, _times: list[int] = times) -> Any:
            t0 = time.perf_counter_ns()
            try:
                return _fn(self, *args)
            finally:
                _times.append(time.perf_counter_ns() - t0)

        setattr(Watcher, name, timed)

    def undo() -> None:
        for name, fn in originals.items():
            setattr(Watcher, name, fn)

    return undo


def _per_call_ns(call: Callable[[], object], n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        call()
    return (time.perf_counter_ns() - t0) / n


def _added_ns(
    call: Callable[[], object], install: Callable[[], Callable[[], object]], rounds: int = 200
) -> float:
    """What ``install`` adds to one ``call``: median over rounds of (with - without), the order
    alternating, so the machine's drift cancels."""
    diffs = []
    for r in range(rounds):
        bare = _per_call_ns(call, 20) if r % 2 == 0 else None
        remove = install()
        hooked = _per_call_ns(call, 20)
        remove()
        if bare is None:
            bare = _per_call_ns(call, 20)
        diffs.append(hooked - bare)
    return statistics.median(diffs)


def _step_cost_ns(run: Any, threads: int, pairs: int, block: int, seed: int) -> tuple[float, float]:
    """The narrow model's bare step and what watch() + run.log add to it (medians of pairs)."""
    from stepwatch.torch import watch

    model, opt, train_step = _training(threads, NARROW)
    order = random.Random(seed)
    bare_ns, diffs = [], []
    i = 0
    for pair in range(WARMUP_PAIRS + pairs):
        modes, took = ["bare", "watched"], {}
        order.shuffle(modes)
        for mode in modes:
            watcher = watch(model, opt, run) if mode == "watched" else None
            t0 = time.perf_counter_ns()
            for _ in range(block):
                loss = train_step(i)
                if watcher is not None:
                    run.log({"loss": loss})
                i += 1
            took[mode] = (time.perf_counter_ns() - t0) / block
            if watcher is not None:
                watcher.close()
        if pair >= WARMUP_PAIRS:
            bare_ns.append(took["bare"])
            diffs.append(took["watched"] - took["bare"])
    return statistics.median(bare_ns), statistics.median(diffs)


def breakdown_worker(threads: int, steps: int, seed: int) -> None:
    """Prints the breakdown (JSON, ns): hook bodies, hook dispatch, the narrow model's cost."""
    import torch

    import stepwatch
    from stepwatch.torch import watch
    from stepwatch.torch._clip import listen

    with tempfile.TemporaryDirectory() as tmp:
        run = stepwatch.init(project="bench-overhead", dir=tmp, run_id="breakdown")
        model, opt, train_step = _training(threads)
        bare_ns = []
        for i in range(WARMUP_STEPS + steps // 4):
            t0 = time.perf_counter_ns()
            train_step(i)
            bare_ns.append(time.perf_counter_ns() - t0)
        spent: dict[str, list[int]] = {}
        undo = _instrument(spent)
        logged = spent["run.log(loss) in the loop"] = []
        with watch(model, opt, run, tokens_per_step=BATCH):
            for i in range(steps):
                loss = train_step(i)
                t0 = time.perf_counter_ns()
                run.log({"loss": loss})
                logged.append(time.perf_counter_ns() - t0)
        undo()
        per_step = [sum(calls) for calls in zip(*spent.values(), strict=True)]
        bodies = {name: [statistics.median(t), statistics.fmean(t)] for name, t in spent.items()}

        narrow, narrow_opt, narrow_step = _training(threads, NARROW)
        narrow_step(0)
        params = list(narrow.parameters())
        x = torch.randn(BATCH, WIDTH)

        def noop(*args: object) -> None:
            return None

        def forward_hook() -> Callable[[], object]:
            return narrow.register_forward_pre_hook(noop).remove  # type: ignore[no-any-return]

        def step_hooks() -> Callable[[], object]:
            pre = narrow_opt.register_step_pre_hook(noop)
            post = narrow_opt.register_step_post_hook(noop)
            return lambda: (pre.remove(), post.remove())

        with torch.no_grad():
            dispatch = {
                "torch: call a forward pre-hook": _added_ns(lambda: narrow(x), forward_hook),
                "torch: call two step hooks": _added_ns(narrow_opt.step, step_hooks),
            }
        dispatch["clip_grad_norm_ wrapper"] = _added_ns(
            lambda: torch.nn.utils.clip_grad_norm_(params, 1.0), lambda: listen(noop)
        )
        bare, added = _step_cost_ns(run, threads, pairs=steps, block=10, seed=seed)
        run.finish()
    print(
        json.dumps(
            {
                "bodies": bodies,
                "per_step": per_step,
                "bare_step": statistics.median(bare_ns[WARMUP_STEPS:]),
                "dispatch": dispatch,
                "narrow_bare": bare,
                "narrow_added": added,
            }
        )
    )


def breakdown(args: argparse.Namespace) -> None:
    import numpy as np

    command = [sys.executable, __file__, "--worker", "breakdown", "--threads", str(args.threads)]
    command += ["--steps", str(args.steps), "--seed", str(args.seed)]
    result = json.loads(subprocess.run(command, check=True, stdout=subprocess.PIPE).stdout)
    names = {**HOOKS, "run.log(loss) in the loop": "run.log(loss) in the loop"}
    print(f"\nWhere the time goes, on the training thread ({args.steps} steps, us per step)")
    print(f"  {'read inside each hook, in the real loop':62} {'median':>7} {'mean':>7}")
    for name, (median, mean) in result["bodies"].items():
        label = f"{name} {names[name]}" if name in HOOKS else name
        print(f"  {label:62} {median / 1e3:7.1f} {mean / 1e3:7.1f}")
    per_step = np.asarray(result["per_step"]) / 1e3
    rng = np.random.default_rng(args.seed)
    boots = rng.choice(per_step, (BOOTSTRAP, len(per_step))).mean(axis=1)
    low, high = np.percentile(boots, [2.5, 97.5])
    print(f"  {'all of the above':62} {np.median(per_step):7.1f} {per_step.mean():7.1f}")
    print("  what torch adds to call them (narrow model, no-op hooks)")
    dispatch = 0.0
    for label, ns in result["dispatch"].items():
        print(f"    {label:60} {ns / 1e3:15.1f}")
        dispatch += ns / 1e3
    total, bare = per_step.mean() + dispatch, result["bare_step"] / 1e3
    print(f"  {'total':62} {total:15.1f}")
    print(
        f"  = {100 * total / bare:.2f} % of this run's bare step ({bare / 1e3:.1f} ms), "
        f"95 % CI {100 * (low + dispatch) / bare:.2f} .. {100 * (high + dispatch) / bare:.2f} %"
    )
    narrow = f"measured whole on the narrow model (same shape, width {NARROW})"
    print(
        f"  {narrow:62} {result['narrow_added'] / 1e3:15.1f}   "
        f"(its bare step {result['narrow_bare'] / 1e3:.0f} us; warm caches)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=400, help="pairs of blocks (bare, watched)")
    parser.add_argument("--block", type=int, default=4, help="steps per block")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the training")
    parser.add_argument("--seed", type=int, default=0, help="block order and bootstrap")
    parser.add_argument("--steps", type=int, default=300, help="steps timed in the breakdown")
    parser.add_argument("--breakdown", action="store_true", help="only the breakdown")
    parser.add_argument("--worker", choices=["overhead", "breakdown"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "overhead":
        overhead_worker(args.pairs, args.block, args.threads, args.seed)
    elif args.worker == "breakdown":
        breakdown_worker(args.threads, args.steps, args.seed)
    else:
        if not args.breakdown:
            overhead(args)
        breakdown(args)


if __name__ == "__main__":
    main()
