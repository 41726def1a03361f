"""One pass over a trace's events with bounded state: operators by self time per thread,
kernels, the GPU timeline per device, the training thread's timeline, launches, data loading
and collectives; then the report."""

from __future__ import annotations

import random
from array import array
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ._advice import advise
from ._names import is_comm_exec, is_comm_kernel, is_comm_op, is_launch, is_memcpy_op
from ._reader import TraceFile, TraceSource
from ._report import Breakdown, CpuSide, Launches, OpStat, Overlap, TraceReport
from ._timeline import Reorder, SelfTimes, Table, Timeline

__all__ = ["analyse_events", "analyse_trace"]

#: Events a thread's operators are made of (torch's key_averages() counts these).
_OP_CATS = frozenset(("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver"))
_GPU_KINDS = {"kernel": "compute", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
#: Operator kinds: where an event goes on its thread's timeline (comm, memcpy, compute in
#: that priority), a marker (a user annotation: a step, a phase) on none.
_COMM, _MEMCPY, _COMPUTE, _MARKER = 0, 1, 2, 3
_OP_TAGS = ("comm", "memcpy", "compute", "annotation")
#: GPU timeline categories, in priority order.
_GPU_COMPUTE, _GPU_COMM, _GPU_MEMCPY = 0, 1, 2
#: Kernels shorter than this are "tiny": their launch costs about as much as they run.
TINY_US = 10.0
#: How far out of order events may come and still be sorted (per thread, per GPU).
THREAD_WINDOW = 1024
GPU_WINDOW = 32_768
#: Bounds on what is kept besides running totals.
_MAX_COLLECTIVES = 1_000_000
_MAX_PENDING_LAUNCHES = 65_536
_DELAY_SAMPLE = 4096


def analyse_trace(
    source: TraceSource, chunk_chars: int = 1 << 20, name: str | None = None
) -> TraceReport:
    """Analyse a Chrome/Kineto trace (plain or gzip), streamed from a path, bytes or a file
    object; ``name`` (as ``TraceFile``'s) is the report's path."""
    with TraceFile(source, chunk_chars, name) as trace:
        analysis = _Analysis()
        analysis.feed(trace.events())
        return analysis.report(trace.name, trace.metadata)


def analyse_events(
    events: Iterable[dict[str, Any]], metadata: dict[str, Any] | None = None, path: str = ""
) -> TraceReport:
    """Analyse events already in memory (a trace built in a test, a filtered one)."""
    analysis = _Analysis()
    analysis.feed(events)
    return analysis.report(path, metadata or {})


class _Thread:
    """One CPU thread: its operators' self times and timeline, its Python functions'."""

    def __init__(self, analysis: _Analysis, name: str) -> None:
        self.name = name
        self.timeline = Timeline(3)
        self._analysis = analysis
        self.ops = SelfTimes(analysis.ops, THREAD_WINDOW, _OP_TAGS, self._open)
        self.python = SelfTimes(analysis.python, THREAD_WINDOW)

    def _open(self, start: float, end: float, name: str, kind: int, inside: bool) -> bool:
        """An operator starts: onto the timeline; a collective not inside another is one."""
        if kind != _MARKER:
            self.timeline.add(start, end, kind)
        if kind == _COMM and not inside:
            calls = self._analysis.comm_exec if is_comm_exec(name) else self._analysis.comm_calls
            if len(calls) < 2 * _MAX_COLLECTIVES:
                calls.extend((start, end - start))
        return inside or kind == _COMM


class _Device:
    """One GPU: its timeline, fed through a reorder window (kernels finish out of order)."""

    def __init__(self) -> None:
        self.timeline = Timeline(3)
        self.order = Reorder(GPU_WINDOW, self.timeline.add)


class _Analysis:
    """The running state of one trace's analysis."""

    def __init__(self) -> None:
        self.ops = Table()
        self.python = Table()
        self.kernels = Table()
        self.comm_exec: array[float] = array("d")  # (start, duration) pairs
        self.comm_calls: array[float] = array("d")
        self.nccl: array[float] = array("d")
        self._threads: dict[tuple[Any, Any], _Thread] = {}
        self._devices: dict[Any, _Device] = {}
        self._base: float | None = None
        self._steps = 0
        self._step_hull = (float("inf"), -float("inf"))
        self._recorded_end = -float("inf")  # the end of the profiler's span of the recording
        self._dataloader_us = 0.0
        self._events = 0
        self._launches = self._graph_launches = self._tiny = 0
        self._sync_us = 0.0
        #: Launches (their ends) and kernels (their starts) by correlation id, until the
        #: other one of the pair is read.
        self._pending: tuple[dict[Any, float], dict[Any, float]] = ({}, {})
        self._delays = _Delays()

    def feed(self, events: Iterable[dict[str, Any]]) -> None:
        for event in events:
            self._events += 1
            ph = event.get("ph")
            if ph == "X":
                self._complete(event)

    def _complete(self, event: dict[str, Any]) -> None:
        try:
            ts = float(event["ts"])
            dur = float(event.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            return
        if self._base is None:
            self._base = ts  # times relative to the first: microseconds keep their nanoseconds
        start = ts - self._base
        end = start + dur
        cat = event.get("cat", "")
        name = str(event.get("name", ""))
        if cat == "Trace":  # Kineto's span of the recording ("PyTorch Profiler (0)")
            self._recorded_end = max(self._recorded_end, end)
        gpu_kind = _GPU_KINDS.get(cat)
        if gpu_kind is not None:
            self._gpu(event, name, gpu_kind, start, end, dur)
        elif cat in _OP_CATS:
            self._op(event, name, cat, start, end, dur)
        elif cat == "python_function":
            self._thread(event).python.order.push(start, end, (name, 0))

    def _thread(self, event: dict[str, Any]) -> _Thread:
        key = (event.get("pid"), event.get("tid"))
        thread = self._threads.get(key)
        if thread is None:
            thread = self._threads[key] = _Thread(self, f"{key[0]}/{key[1]}")
        return thread

    def _op(self, event: dict[str, Any], name: str, cat: str, start: float, end: float,
            dur: float) -> None:  # fmt: skip
        if cat == "user_annotation":
            if name.startswith("ProfilerStep#"):
                name = "ProfilerStep*"  # one row for all steps, as key_averages() has it
                self._steps += 1
                lo, hi = self._step_hull
                self._step_hull = (min(lo, start), max(hi, end))
            elif name.startswith("enumerate(DataLoader)"):
                self._dataloader_us += dur
            kind = _COMM if is_comm_op(name) else _MARKER
        elif cat == "cpu_op":
            kind = _COMM if is_comm_op(name) else _MEMCPY if is_memcpy_op(name) else _COMPUTE
        else:  # the CUDA runtime and driver
            kind = _COMPUTE
            if is_launch(name):
                self._launches += 1
                self._pair(event, 0, end)
            elif name.startswith("cudaGraphLaunch"):
                self._graph_launches += 1
            elif "Synchronize" in name:
                self._sync_us += dur
        self._thread(event).ops.order.push(start, end, (name, kind))

    def _gpu(self, event: dict[str, Any], name: str, kind: str, start: float, end: float,
             dur: float) -> None:  # fmt: skip
        args = event.get("args") or {}
        device_id = args.get("device", event.get("pid"))
        device = self._devices.get(device_id)
        if device is None:
            device = self._devices[device_id] = _Device()
        if kind == "compute":
            if is_comm_kernel(name):
                kind = "comm"
                if len(self.nccl) < 2 * _MAX_COLLECTIVES:
                    self.nccl.extend((start, dur))
            if dur < TINY_US:
                self._tiny += 1
            self._pair(event, 1, start)
        category = {"compute": _GPU_COMPUTE, "comm": _GPU_COMM}.get(kind, _GPU_MEMCPY)
        device.order.push(start, end, category)
        self.kernels.add(name, dur, kind)

    def _pair(self, event: dict[str, Any], side: int, ts: float) -> None:
        """A kernel launch (side 0, at the call's end) or a kernel (side 1, at its start),
        paired with the other by the correlation id both carry, whichever comes first in
        the file: the delay is from the launch call's return to the kernel's start (none
        when the kernel started before the call returned)."""
        key = (event.get("args") or {}).get("correlation")
        if key is None:
            return
        mine, other = self._pending if side == 0 else self._pending[::-1]
        seen = other.pop(key, None)
        if seen is not None:
            self._delays.add(max(0.0, ts - seen if side else seen - ts))
            return
        if len(mine) >= _MAX_PENDING_LAUNCHES:
            del mine[next(iter(mine))]  # the oldest unmatched goes: the state stays bounded
        mine[key] = ts

    def report(self, path: str, metadata: dict[str, Any]) -> TraceReport:
        for thread in self._threads.values():
            thread.ops.flush()
            thread.python.flush()
        for device in self._devices.values():
            device.order.flush()
        late = sum(t.ops.order.late + t.python.order.late for t in self._threads.values())
        late += sum(d.order.late for d in self._devices.values())
        cpu = self._cpu_side()
        breakdown, overlap = (
            self._gpu_breakdown() if self._devices else (self._cpu_breakdown(), None)
        )
        dist = metadata.get("distributedInfo") or {}
        collectives = self._collectives()
        report = TraceReport(
            path=path,
            rank=_int_or_none(dist.get("rank")),
            world_size=_int_or_none(dist.get("world_size")),
            steps=self._steps,
            events=self._events,
            late_events=late,
            breakdown=breakdown,
            overlap=overlap,
            ops=_stats(self.ops),
            kernels=_stats(self.kernels),
            launches=self._launch_stats() if self._devices or self._launches else None,
            cpu=cpu,
            collectives=len(collectives) // 2,
            advice=[],
            collective_us=collectives[1::2],
        )
        return replace(report, advice=advise(report))

    def _span_us(self, first: float, last: float) -> float:
        """A timeline's span: its own hull, widened to the profiled steps (0 when empty)."""
        lo, hi = self._step_hull
        if hi > self._recorded_end > -float("inf"):
            hi = self._recorded_end  # a step still open when recording stopped ends with it
        lo, hi = min(first, lo), max(last, hi)
        return hi - lo if hi > lo else 0.0

    def _gpu_breakdown(self) -> tuple[Breakdown, Overlap]:
        compute = comm = memcpy = idle = comm_own = 0.0
        span_us = 0.0
        for device in self._devices.values():
            t = device.timeline.totals()
            span = self._span_us(t.first, t.last)
            span_us = max(span_us, span)
            compute += t.exclusive[_GPU_COMPUTE]
            comm += t.exclusive[_GPU_COMM]
            memcpy += t.exclusive[_GPU_MEMCPY]
            idle += span - t.busy
            comm_own += t.own[_GPU_COMM]
        overlapped = comm_own - comm
        breakdown = Breakdown(
            "gpu", compute / 1e6, comm / 1e6, memcpy / 1e6, idle / 1e6, span_us / 1e6,
            len(self._devices),
        )  # fmt: skip
        share = overlapped / comm_own if comm_own > 0 else None
        return breakdown, Overlap(comm_own / 1e6, overlapped / 1e6, share)

    def _training_thread(self) -> _Thread | None:
        return max(self._threads.values(), key=lambda t: t.timeline.totals().busy, default=None)

    def _cpu_breakdown(self) -> Breakdown:
        thread = self._training_thread()
        if thread is None:
            return Breakdown("cpu", 0.0, 0.0, 0.0, 0.0, 0.0, 0)
        t = thread.timeline.totals()
        span = self._span_us(t.first, t.last)
        return Breakdown(
            "cpu", t.exclusive[_COMPUTE] / 1e6, t.exclusive[_COMM] / 1e6,
            t.exclusive[_MEMCPY] / 1e6, (span - t.busy) / 1e6, span / 1e6, 0,
        )  # fmt: skip

    def _cpu_side(self) -> CpuSide | None:
        thread = self._training_thread()
        if thread is None:
            return None
        t = thread.timeline.totals()
        return CpuSide(
            thread=thread.name,
            busy_s=t.busy / 1e6,
            outside_ops_s=(self._span_us(t.first, t.last) - t.busy) / 1e6,
            dataloader_s=self._dataloader_us / 1e6,
            python_functions=_stats(self.python)[:20],
        )

    def _launch_stats(self) -> Launches:
        kernels = sum(row[1] for row in self.kernels.rows.values() if row[2] in ("compute", "comm"))
        d = self._delays
        return Launches(
            launches=self._launches,
            graph_launches=self._graph_launches,
            kernels=kernels,
            tiny_kernels=self._tiny,
            tiny_under_us=TINY_US,
            tiny_share=self._tiny / kernels if kernels else 0.0,
            delay_matched=d.count,
            delay_mean_us=d.total / d.count if d.count else None,
            delay_p50_us=d.quantile(0.5),
            delay_p90_us=d.quantile(0.9),
            delay_max_us=d.max if d.count else None,
            sync_s=self._sync_us / 1e6,
        )

    def _collectives(self) -> array[float]:
        """(start, duration) of the collectives in start order: the NCCL kernels, else the
        backends' own annotations of them running, else the c10d calls."""
        chosen = self.nccl or self.comm_exec or self.comm_calls
        pairs = sorted(zip(chosen[::2], chosen[1::2], strict=True))
        return array("d", [x for pair in pairs for x in pair])


class _Delays:
    """Launch-to-start delays: count, total and max exactly, quantiles from a uniform sample
    of a bounded size (reservoir sampling, seeded: the same trace gives the same figures)."""

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.max = 0.0
        self._sample: list[float] = []
        self._random = random.Random(0)

    def add(self, delay: float) -> None:
        self.count += 1
        self.total += delay
        self.max = max(self.max, delay)
        if len(self._sample) < _DELAY_SAMPLE:
            self._sample.append(delay)
        else:
            slot = self._random.randrange(self.count)
            if slot < _DELAY_SAMPLE:
                self._sample[slot] = delay

    def quantile(self, q: float) -> float | None:
        if not self._sample:
            return None
        ordered = sorted(self._sample)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _stats(table: Table) -> list[OpStat]:
    """A table's rows, largest self time first, each with its share of the total."""
    total = sum(row[0] for row in table.rows.values())
    rows = sorted(table.rows.items(), key=lambda item: -item[1][0])
    return [
        OpStat(name, round(row[0], 3), row[1], row[0] / total if total > 0 else 0.0, row[2])
        for name, row in rows
    ]


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
