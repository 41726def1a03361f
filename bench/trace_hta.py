"""stepwatch's trace analysis beside Holistic Trace Analysis (HTA) on real GPU traces: the GPU
time split, the kernels by time, the communication/computation overlap, per rank.

Run: python bench/trace_hta.py DIR_OR_FILE... [--hta-python PATH] [--top 5]

Real GPU traces: the Kineto traces HTA's own repository ships as test data
(github.com/facebookresearch/HolisticTraceAnalysis, tests/data/*/*.json.gz: single GPUs,
NCCL ranks, nanosecond timestamps, an AMD/ROCm trace), or your own from torch.profiler on a
GPU (`on_trace_ready=torch.profiler.tensorboard_trace_handler(DIR)`). A directory is read
for its *.json and *.json.gz files.

HTA runs in a child process of `--hta-python` (a Python where `import hta` works; keep it
apart from stepwatch's environment, it pins its own pandas); without it, or when it cannot
import hta, only stepwatch's figures are printed and that is said. Each trace is given to HTA
alone (a directory holding only it), with `include_last_profiler_step=True`, since stepwatch
counts every step.

For each trace and rank it prints, stepwatch beside HTA, with the difference relative to
HTA's figure:
- the GPU time in compute, communication, memory copies and sets, and idle: HTA's temporal
  breakdown gives compute, idle and the rest ("non-compute"), its kernel-type breakdown
  the time of each kind of kernel (memory ones included) with overlaps between kinds
  counted once;
- busy time (kernels of any kind, overlaps counted once) and the span HTA measures idle in
  (first kernel's start to last kernel's end);
- the comm/compute overlap, as a share of the communication time;
- kernel launches paired with their kernels, and the delay from the launch call's return
  to the kernel's start (HTA's kernel launch stats, copies and sets left out);
- the top kernels by total time, with calls.
Prints figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from stepwatch.trace import TraceFile, analyse_events

_GPU_CATS = frozenset(("kernel", "gpu_memcpy", "gpu_memset"))
#: Launch delays: launch call's end to kernel's start, as HTA's kernel launch stats have it.
_LAUNCH_ROWS = ("launches matched", "launch delay mean (us)", "launch delay p50 (us)",
                "launch delay max (us)")  # fmt: skip

#: Run by the HTA Python: one JSON object per trace, its figures per rank.
_HTA_CHILD = r"""
import json, logging, os, sys, tempfile
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
from hta.utils.utils import get_kernel_type, merge_kernel_intervals

def union(df):
    if df.empty:
        return 0.0
    merged = merge_kernel_intervals(df.copy())
    return float(merged.end.sum() - merged.ts.sum())

def figures(tmp, top):
    ta = TraceAnalysis(trace_dir=tmp, include_last_profiler_step=True)
    temporal = ta.get_temporal_breakdown(visualize=False)
    sym = ta.t.symbol_table.get_sym_table()
    ranks = {}
    for row in temporal.itertuples():
        df = ta.t.get_trace(row.rank)
        k = df[df["stream"].ne(-1)].copy()
        k["name"] = k["name"].map(lambda i: sym[i])
        k["kind"] = k["name"].map(get_kernel_type)
        by_kind = {kind: union(k[k["kind"].eq(kind)][["ts", "dur"]])
                   for kind in ("COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER")}
        agg = k.groupby("name")["dur"].agg(["sum", "count"]).sort_values(
            "sum", ascending=False).head(top)
        ratio = None
        if by_kind["COMMUNICATION"] > 0:  # HTA's overlap fails on a rank without any
            ov = ta.get_comm_comp_overlap(visualize=False)
            ratio = float(ov[ov["rank"].eq(row.rank)]["comp_comm_overlap_pctg"].iloc[0]) / 100
        stats = ta.get_cuda_kernel_launch_stats(
            ranks=[row.rank], include_memory_events=False, visualize=False).get(row.rank)
        delays = stats["launch_delay"] if stats is not None else []
        ranks[int(row.rank)] = {
            "compute_us": float(row._3), "idle_us": float(row._2),
            "non_compute_us": float(row._4), "span_us": float(row._5),
            "busy_us": union(k[["ts", "dur"]]), "kinds_us": by_kind, "overlap": ratio,
            "launch": [len(delays), float(delays.mean()), float(delays.median()),
                       float(delays.max())] if len(delays) else None,
            "kernels": [[n, float(s), int(c)] for n, s, c in agg.itertuples()],
        }
    return ranks

top = int(sys.argv[1])
for path in sys.argv[2:]:
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(os.path.abspath(path), os.path.join(tmp, os.path.basename(path)))
        try:
            out = {"path": path, "ranks": figures(tmp, top)}
        except Exception as exc:
            out = {"path": path, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(out), flush=True)
"""


def trace_files(args: list[str]) -> list[Path]:
    """The traces named, a directory's *.json and *.json.gz files in name order."""
    out: list[Path] = []
    for arg in args:
        p = Path(arg)
        if p.is_dir():
            out += sorted(q for q in p.rglob("*") if q.name.endswith((".json", ".json.gz")))
        else:
            out.append(p)
    return out


def stepwatch_figures(path: Path, top: int) -> dict[str, Any]:
    """stepwatch's figures for one trace, in the shape of HTA's (microseconds), from one
    read of it: the kernel span is taken from the events on their way to the analysis."""
    span = KernelSpan()
    with TraceFile(path) as trace:
        # The file's metadata fills in as its events are read, so it is whole by the time
        # the analysis, having taken the last event, makes its report.
        r = analyse_events(span.watch(trace.events()), trace.metadata, str(path))
    b = r.breakdown
    busy = b.compute + b.comm + b.memcpy
    return {
        "rank": r.rank if r.rank is not None else 0,
        "basis": b.basis,
        "compute_us": b.compute * 1e6,
        "comm_us": b.comm * 1e6,
        "memcpy_us": b.memcpy * 1e6,
        "idle_us": b.idle * 1e6,
        "busy_us": busy * 1e6,
        "kernel_span_us": span.us,
        "overlap": r.overlap.share if r.overlap else None,
        "kernels": [[k.name, k.self_us, k.calls] for k in r.kernels[:top]],
        "launch": [
            r.launches.delay_matched,
            r.launches.delay_mean_us,
            r.launches.delay_p50_us,
            r.launches.delay_max_us,
        ]
        if r.launches and r.launches.delay_matched
        else None,
    }


class KernelSpan:
    """From the first GPU activity's start to the last one's end: the span HTA measures
    idle time in (stepwatch's spans the steps), noted as ``watch`` passes the events on."""

    def __init__(self) -> None:
        self.first, self.last = float("inf"), -float("inf")

    def watch(self, events: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for e in events:
            if e.get("ph") == "X" and e.get("cat") in _GPU_CATS:
                self.first = min(self.first, float(e["ts"]))
                self.last = max(self.last, float(e["ts"]) + float(e.get("dur", 0)))
            yield e

    @property
    def us(self) -> float | None:
        return self.last - self.first if self.last > self.first else None


def hta_figures(python: str, paths: list[Path], top: int) -> dict[str, dict[str, Any]] | str:
    """HTA's figures per trace path, or why there are none."""
    check = subprocess.run([python, "-c", "import hta"], capture_output=True, text=True)
    if check.returncode != 0:
        return f"HTA not importable with {python}: {check.stderr.strip().splitlines()[-1:]}"
    #: HTA rounds fractional-microsecond times inward (start up, end down) unless told not to:
    #: told, its figures are of the same times as stepwatch's.
    env = dict(os.environ, PYTHONWARNINGS="ignore", HTA_DISABLE_NS_ROUNDING="1")
    with tempfile.TemporaryDirectory() as tmp:  # HTA may write next to its working dir
        done = subprocess.run([python, "-c", _HTA_CHILD, str(top), *map(str, paths)],
                              capture_output=True, text=True, cwd=tmp, env=env)  # fmt: skip
    out = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            obj = json.loads(line)
            out[obj["path"]] = obj
    if not out:
        return f"HTA printed nothing (exit {done.returncode}): {done.stderr[-500:]}"
    return out


def rel(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None:
        return ""
    if theirs == 0:
        return "=" if abs(ours) < 1e-9 else "new"
    return f"{(ours - theirs) / abs(theirs):+.1%}"


def row(label: str, ours: float | None, theirs: float | None, unit: str = "us") -> str:
    def fmt(v: float | None) -> str:
        if v is None:
            return "-"
        v = v if abs(v) >= 1e-9 else 0.0  # no "-0.0"
        return f"{v:.1%}" if unit == "%" else f"{v:,.1f}"

    return f"  {label:<28} {fmt(ours):>14} {fmt(theirs):>14} {rel(ours, theirs):>9}"


def report(path: Path, ours: dict[str, Any], hta: dict[str, Any] | None) -> None:
    print(f"\n{path}  (rank {ours['rank']}, basis {ours['basis']})")
    ranks = (hta or {}).get("ranks") or {}
    theirs = next(iter(ranks.values()), None) if len(ranks) == 1 else None
    if hta and "error" in hta:
        print(f"  HTA failed: {hta['error']}")
    print(f"  {'GPU time':<28} {'stepwatch':>14} {'HTA':>14} {'diff':>9}")
    t: dict[str, Any] = theirs or {}
    kinds = t.get("kinds_us", {})
    non_compute = t.get("non_compute_us")
    print(row("compute (us)", ours["compute_us"], t.get("compute_us")))
    print(row("comm not under compute (us)", ours["comm_us"], None))
    print(row("memcpy/set under neither (us)", ours["memcpy_us"], None))
    print(row("comm+memcpy+other (us)", ours["comm_us"] + ours["memcpy_us"], non_compute))
    print(row("  comm kernels, own (us)", None, kinds.get("COMMUNICATION")))
    print(row("  memory kernels, own (us)", None, kinds.get("MEMORY")))
    print(row("  other kernels, own (us)", None, kinds.get("OTHER")))
    print(row("busy (us)", ours["busy_us"], t.get("busy_us")))
    print(row("first..last kernel (us)", ours["kernel_span_us"], t.get("span_us")))
    idle_in_kernel_span = (
        ours["kernel_span_us"] - ours["busy_us"] if ours["kernel_span_us"] is not None else None
    )
    print(row("idle in that (us)", idle_in_kernel_span, t.get("idle_us")))
    print(row("idle in the steps (us)", ours["idle_us"], None))
    print(row("comm/compute overlap", ours["overlap"], t.get("overlap"), unit="%"))
    ol, tl = ours["launch"] or [None] * 4, t.get("launch") or [None] * 4
    for i, what in enumerate(_LAUNCH_ROWS):
        print(row(what, ol[i], tl[i]))
    hta_kernels = {name: (s, c) for name, s, c in t.get("kernels", [])}
    print(f"  top kernels by time{'':<9} {'stepwatch us':>14} {'HTA us':>14} {'diff':>9} calls")
    for name, us, calls in ours["kernels"]:
        s, c = hta_kernels.get(name, (None, None))
        print(f"    {name[:90]}")
        print(f"{row('', us, s)} {calls} / {c if c is not None else '-'}")
    missing = [n for n in hta_kernels if n not in {k[0] for k in ours["kernels"]}]
    for name in missing:
        print(f"    HTA's top, not stepwatch's: {name[:60]} {hta_kernels[name][0]:,.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="traces, or directories holding them")
    parser.add_argument("--hta-python", help="a Python where `import hta` works")
    parser.add_argument("--top", type=int, default=5, help="kernels shown per trace")
    args = parser.parse_args()
    paths = trace_files(args.paths)
    if not paths:
        sys.exit("no *.json or *.json.gz traces found")
    hta: dict[str, dict[str, Any]] | str = "no --hta-python given: HTA not run"
    if args.hta_python:
        hta = hta_figures(args.hta_python, paths, args.top)
    if isinstance(hta, str):
        print(hta)
    for path in paths:
        report(path, stepwatch_figures(path, args.top), None if isinstance(hta, str)
               else hta.get(str(path)))  # fmt: skip


if __name__ == "__main__":
    main()
