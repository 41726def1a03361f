"""A kept trace analysed for the dashboard's trace view: the object `stepwatch trace --json`
prints, plus the spans of one profiled step per thread and GPU stream for its timeline.

The trace is streamed from its gzip bytes (decompressed a chunk at a time), never parsed
whole: one pass analyses it and finds the first complete profiled step (``ProfilerStep#N``),
a second keeps the longest spans of that step (at most ``MAX_SPANS``).
Answers are kept per profile in a small LRU, so opening a trace again costs nothing.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from fastapi import APIRouter

from .._recent import Recent
from ..trace import TraceFile, analyse_events, span_kind
from ._auth import Reader
from ._errors import ApiError
from ._jsonio import JSON, clean
from ._scope import Scope

__all__ = ["MAX_SPANS", "analyse_profile", "profile_analysis_router"]

#: Spans of the timeline, the longest kept (a step of a large model has far more events).
MAX_SPANS = 5_000
#: Analyses kept in memory (each holds at most ``MAX_SPANS`` spans and the operator tables).
CACHE_SIZE = 4
#: Names of threads and processes remembered from the trace's metadata events.
_MAX_NAMES = 10_000
_GPU_CATS = frozenset(("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"))
#: The profiler's own span of the whole recording: no work, left off the timeline.
_NOT_WORK = frozenset(("Trace",))
_Key = tuple[str, str]


def analyse_profile(trace: bytes, path: str = "") -> dict[str, Any]:
    """The analysis of a gzip (or plain) Chrome/Kineto trace: ``stepwatch trace --json``'s
    object, and ``timeline``: the spans of the first complete profiled step."""
    seen = _Survey()
    with TraceFile(trace, name=path) as first:
        report = analyse_events(seen.watch(first.events()), first.metadata, path)
    window = seen.window()
    spans = _Spans(*window[:2]) if window is not None else None
    if spans is not None:
        with TraceFile(trace, name=path) as second:
            spans.feed(second.events())
    out: dict[str, Any] = clean(report.to_json())
    out["timeline"] = _timeline(window, spans, seen.names)
    return out


class _Survey:
    """What the first pass notes besides the analysis: the profiled steps, the hull of all
    spans (the timeline of a trace without steps), and the names of threads and processes."""

    def __init__(self) -> None:
        self.step: tuple[float, float, str] | None = None  # the earliest complete step
        self.first = float("inf")
        self.last = -float("inf")
        self.names: dict[tuple[str, str], str] = {}

    def watch(self, events: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for event in events:
            ph = event.get("ph")
            if ph == "X":
                self._span(event)
            elif ph == "M":
                self._name(event)
            yield event

    def _span(self, event: dict[str, Any]) -> None:
        times = _times(event)
        if times is None or _cat(event) in _NOT_WORK:
            return
        ts, dur = times
        self.first = min(self.first, ts)
        self.last = max(self.last, ts + dur)
        name = str(event.get("name", ""))
        if name.startswith("ProfilerStep#") and dur > 0:
            if self.step is None or ts < self.step[0]:
                self.step = (ts, ts + dur, name)

    def _name(self, event: dict[str, Any]) -> None:
        kind = event.get("name")
        args = event.get("args")
        args = args if isinstance(args, dict) else {}
        if kind not in ("thread_name", "process_name") or len(self.names) >= _MAX_NAMES:
            return
        tid = str(event.get("tid", "")) if kind == "thread_name" else ""
        self.names[str(event.get("pid", "")), tid] = str(args.get("name", ""))

    def window(self) -> tuple[float, float, str | None] | None:
        """The first complete profiled step, else every span (None: the trace has none)."""
        if self.step is not None:
            return self.step
        return (self.first, self.last, None) if self.last >= self.first else None


class _Spans:
    """The second pass: the spans that overlap ``[start, end)``, cut to it, the longest
    ``MAX_SPANS`` of them kept (a heap), and how many there were."""

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end
        self.total = 0
        self._heap: list[tuple[float, int, tuple[Any, ...]]] = []
        self._seq = itertools.count()

    def feed(self, events: Iterable[dict[str, Any]]) -> None:
        for event in events:
            if event.get("ph") != "X" or _cat(event) in _NOT_WORK:
                continue
            times = _times(event)
            if times is None:
                continue
            ts, dur = times
            lo, hi = max(ts, self.start), min(ts + dur, self.end)
            if ts >= self.end or (hi <= lo and not (dur == 0 and ts >= self.start)):
                continue
            self.total += 1
            key = (str(event.get("pid", "")), str(event.get("tid", "")))
            cut = lo > ts or hi < ts + dur
            item = (hi - lo, next(self._seq), (key, event, lo - self.start, hi - lo, cut))
            if len(self._heap) < MAX_SPANS:
                heapq.heappush(self._heap, item)
            elif item[0] > self._heap[0][0]:
                heapq.heapreplace(self._heap, item)

    def kept(self) -> list[tuple[Any, ...]]:
        return [entry[2] for entry in self._heap]


def _cat(event: dict[str, Any]) -> str:
    cat = event.get("cat", "")
    return cat if isinstance(cat, str) else str(cat)


def _times(event: dict[str, Any]) -> tuple[float, float] | None:
    try:
        return float(event["ts"]), float(event.get("dur", 0.0))
    except (KeyError, TypeError, ValueError):
        return None


def _timeline(
    window: tuple[float, float, str | None] | None,
    spans: _Spans | None,
    names: dict[tuple[str, str], str],
) -> dict[str, Any]:
    """Rows (a thread or GPU stream each, CPU threads first) and their spans, each with its
    depth of nesting among the spans kept, in start order per row."""
    out: dict[str, Any] = {
        "step": None, "dur_us": 0.0, "rows": [], "spans": [], "spans_in_step": 0,
        "max_spans": MAX_SPANS, "capped": False,
    }  # fmt: skip
    if window is None or spans is None:
        return out
    start, end, step = window
    kept = spans.kept()
    by_row: dict[_Key, list[tuple[Any, ...]]] = {}
    gpu: set[_Key] = set()
    for item in kept:
        by_row.setdefault(item[0], []).append(item)
        if _cat(item[1]) in _GPU_CATS:
            gpu.add(item[0])
    order = sorted(by_row, key=lambda k: (k in gpu, _natural(k[0]), _natural(k[1])))
    rows, out_spans = [], []
    for index, key in enumerate(order):
        rows.append({"pid": key[0], "tid": key[1], "name": _row_name(key, names),
                     "kind": "gpu" if key in gpu else "cpu"})  # fmt: skip
        stack: list[float] = []
        for _, event, at, dur, cut in sorted(by_row[key], key=lambda s: (s[2], -s[3])):
            while stack and stack[-1] <= at:
                stack.pop()
            name, cat = str(event.get("name", "")), _cat(event)
            span = {
                "name": name, "cat": cat, "kind": span_kind(name, cat),
                "row": index, "tid": key[1], "start_us": round(at, 3),
                "dur_us": round(dur, 3), "depth": len(stack),
            }  # fmt: skip
            if cut:
                span["cut"] = True
            out_spans.append(span)
            stack.append(at + dur)
    out.update(step=step, dur_us=round(end - start, 3), rows=rows, spans=out_spans,
               spans_in_step=spans.total, capped=spans.total > len(kept))  # fmt: skip
    return out


def _row_name(key: _Key, names: dict[tuple[str, str], str]) -> str:
    pid, tid = key
    process = names.get((pid, ""), "")
    thread = names.get((pid, tid), "")
    return " · ".join(x for x in (process or pid, thread or tid) if x)


def _natural(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text), "")
    except ValueError:
        return (1, 0.0, text)


def profile_analysis_router(scope: Scope, cache_size: int = CACHE_SIZE) -> APIRouter:
    """The analysis route of a run's kept traces over ``scope``'s store."""
    router = APIRouter(prefix="/api/v1/runs/{run_id}/profiles")
    profiles = scope.store.profiles
    cache: Recent[_Key, dict[str, Any]] = Recent(cache_size)
    work = threading.Lock()  # one analysis at a time: each reads a whole trace

    @router.get("/{profile_id}/analysis")
    def analysis(who: Reader, run_id: str, profile_id: str) -> JSON:
        """The trace analysed as `stepwatch trace --json` prints it (``kind`` "trace"), with
        ``profile`` (its run, rank and steps) and ``timeline``: the spans of its first
        complete profiled step per thread and GPU stream (``rows``; ``spans`` of ``{name,
        cat, row, tid, start_us, dur_us, depth}``, times from the step's start, the longest
        ``max_spans`` kept, ``capped`` when some were left out)."""
        scope.run(who, run_id)
        info = next((p for p in profiles.of_run(run_id) if p.id == profile_id), None)
        if info is None:
            raise ApiError(404, f"run {run_id!r} has no profile {profile_id!r}")

        def make() -> dict[str, Any]:
            trace = profiles.trace(run_id, profile_id)
            if trace is None:  # dropped meanwhile (the oldest go first)
                raise ApiError(404, f"run {run_id!r} has no profile {profile_id!r}")
            try:
                return analyse_profile(trace, f"{run_id}/{profile_id}")
            except (ValueError, TypeError, AttributeError, KeyError) as exc:  # TraceError too
                # an event of a shape no profiler writes: the upload took it unparsed
                raise ApiError(400, f"the trace cannot be analysed: {exc}") from None

        key = (run_id, profile_id)
        found = cache.get(key)
        if found is None:
            with work:  # a second asker of the same trace waits for the first one's answer
                found = cache.get(key)
                if found is None:
                    found = make()
                    cache.put(key, found)
        return JSON({**found, "profile": info.as_dict()})

    return router
