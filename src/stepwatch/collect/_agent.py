"""The node agent's loop: read each source at its own interval, label, and feed the pipeline.

One thread serves every source, so the agent's cost is a few reads per
second plus one flush; a source that fails is counted and reported, never fatal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

from .._periodic import Periodic
from ..model import NO_STEP, Event, SeriesKey
from ..model import Run as RunRecord
from ..sdk import Pipeline
from ._source import Flushes, Reading, Source

__all__ = ["SOURCE_ERRORS", "Agent"]

log = logging.getLogger("stepwatch.collect")

#: Cumulative count of failed reads per source (label ``source``).
SOURCE_ERRORS = "agent.source_errors"

_LabelSig = tuple[tuple[str, str], ...]


class Agent:
    """Schedules ``sources`` and hands their readings to ``pipeline`` with ``labels`` added.

    Args:
        sources: what to read; each at its own ``interval_s``.
        pipeline: where samples and events go (spool, then the collector).
        labels: added to every sample and event (node, and run when attached to one).
        wall: timestamps of readings; monotonic: the schedule.
    """

    def __init__(
        self,
        sources: Sequence[Source],
        pipeline: Pipeline,
        labels: Mapping[str, str],
        *,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sources = list(sources)
        self.pipeline, self.labels = pipeline, dict(labels)
        self._wall, self._monotonic = wall, monotonic
        self._ids: dict[tuple[str, _LabelSig], int] = {}
        self._errors: dict[str, int] = {}
        self._failing: set[str] = set()
        self._due: list[float] = []
        self._worker = Periodic(
            self._read_due,
            1.0,
            name="stepwatch-agent",
            failed="the agent's reads failed; carrying on",
            log=log,
            at_start=True,
            next_in=self._next_read_in,
        )

    def start(self) -> Agent:
        """Read every source now, then on its schedule, in a daemon thread."""
        self._due = [self._monotonic()] * len(self.sources)
        self._worker.start()
        return self

    def stop(self, timeout_s: float = 10.0, finish: RunRecord | None = None) -> bool:
        """Stop reading, close the sources, then ship what is left (and ``finish``, the end of
        the run this agent's owner created) for at most ``timeout_s``; True when all was delivered.
        """
        self._worker.stop()
        for source in self.sources:
            try:
                if isinstance(source, Flushes):
                    self.emit(source.flush(), self._wall())
                source.close()
            except Exception:
                log.exception("closing source %s failed", source.name)
        return self.pipeline.close(timeout_s, finish)

    def _read_due(self) -> None:
        """Read the sources whose time has come."""
        due, now = self._due, self._monotonic()
        for i, source in enumerate(self.sources):
            if now >= due[i]:
                self.read(source)
                due[i] += source.interval_s
                if due[i] <= now:  # fell behind: skip the missed reads, keep the rate
                    due[i] = now + source.interval_s

    def _next_read_in(self) -> float:
        """Seconds until the next source is due (a second when there is none)."""
        now = self._monotonic()
        return min(self._due, default=now + 1.0) - now

    def read(self, source: Source) -> None:
        """Read one source now; a failure becomes an error count and one event per streak."""
        now = self._wall()
        try:
            reading = source.read(now)
        except Exception as exc:
            self._source_failed(source.name, exc, now)
            return
        self._failing.discard(source.name)
        self.emit(reading, now)

    def emit(self, reading: Reading, ts: float) -> None:
        """Append a reading's samples (stamped ``ts``, at their step if they have one) and events;
        safe from any thread."""
        by_step: dict[int, tuple[list[int], list[float]]] = {}
        for sample in reading.samples:
            step = NO_STEP if sample.step is None else sample.step
            series, values = by_step.setdefault(step, ([], []))
            series.append(self._series(sample.name, sample.labels))
            values.append(float(sample.value))
        for step, (series, values) in by_step.items():
            self.pipeline.append(series, values, ts, step)
        for event in reading.events:
            self.emit_event(event)

    def emit_event(self, event: Event) -> None:
        """Queue one event with the agent's labels under its own."""
        doc = event.as_dict()
        doc["labels"] = {**self.labels, **event.labels}
        self.pipeline.add_event(doc)

    def _series(self, name: str, labels: Mapping[str, str]) -> int:
        sig = tuple(labels.items())
        sid = self._ids.get((name, sig))
        if sid is None:
            key = SeriesKey.of(name, {**labels, **self.labels})
            sid = self._ids[name, sig] = self.pipeline.intern(key)
        return sid

    def _source_failed(self, name: str, exc: Exception, now: float) -> None:
        count = self._errors[name] = self._errors.get(name, 0) + 1
        sample_id = self._series(SOURCE_ERRORS, {"source": name})
        self.pipeline.append([sample_id], [float(count)], now, NO_STEP)
        if name not in self._failing:
            self._failing.add(name)
            log.warning("reading %s failed: %s", name, exc)
            text = f"reading {name} failed: {type(exc).__name__}: {exc}"
            self.emit_event(Event(now, "collector_error", text, {}, {"source": name}))
