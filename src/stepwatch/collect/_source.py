"""The contract every collector source meets: read what is there now, as samples and events.

A source knows nothing of spools or HTTP; the agent schedules it, adds the
node (and run) labels, and hands its readings to the same pipeline the SDK uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..model import Event

__all__ = ["Flushes", "Reading", "Sample", "Source"]


@dataclass(slots=True)
class Sample:
    """One value read now; ``labels`` are the source's own (gpu, path, pid...), not node/run.
    ``step`` is the training step a metric read from a log line belongs to."""

    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)
    step: int | None = None


@dataclass(slots=True)
class Reading:
    """What one ``read`` produced: samples stamped with the read's time, plus events."""

    samples: list[Sample] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


class Source(Protocol):
    """A sampled source. ``read`` must not raise for a device or endpoint that is unwell:
    an unavailable value is NaN or absent, and the trouble is an event (see nvitop)."""

    #: Short name used in logs and in the agent's per-source error counter ("host", "gpu").
    name: str
    #: Seconds between reads.
    interval_s: float

    def read(self, now: float) -> Reading:
        """Read the current values; ``now`` is the wall-clock time the agent stamps them with."""
        ...

    def close(self) -> None:
        """Release handles and stop any thread the source started."""
        ...


@runtime_checkable
class Flushes(Protocol):
    """A source that holds data back (a partial line, a traceback still open) until flushed."""

    def flush(self) -> Reading:
        """Hand over what is held back; called before ``close`` so nothing is lost."""
        ...
