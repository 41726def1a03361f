"""Absence: a member (a node, a producer of a node) that stops reporting while others carry on.

Fed the data time and member of every sample of the members it watches (any metric, heartbeats
included), in data-time order. A member that has reported before is ``down`` once it has been
silent for more than ``timeout_s`` of data time during which the others kept reporting without
a gap of their own longer than ``timeout_s``. So a run that ends, or a replay that stops, never
makes every node "down": silence counts only while someone else is heard (a silent node among
talking ones, not a quiet run). The default of 60 s is twelve missed 5 s heartbeats: far beyond
any ordinary jitter of sampling, and well within the two minutes in which a lost node should be
reported. A ``recovered`` finding follows when a down member reports again.

Every sample says its member is alive, but only a member that has sent a sample on its own
clock (one without an optimizer step: a heartbeat, an agent's reading) is judged by its
silence. Training metrics come at the pace of the steps, which an evaluation or a hung
collective stops on every node alike: their silence alone means nothing, their presence that
the process lives. So when a member has several sources (a node: its agent, its ranks), they
corroborate the member's silence only if they all fell silent together, within a third of
``timeout_s`` of the member's last sample; sources that paused apart (ranks in an evaluation
pause, an agent that restarts meanwhile; ranks that paused long before when the whole job
hung) leave the silence unexplained, and no member is down for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike

from ...model import SeriesKey
from ...sdk import HEARTBEAT
from ._base import Bools, Floats, _validated
from ._peers import MAX_MEMBERS, Ints

#: The label the engine gives every series for the process of its node that sent it, so that a
#: rule ``by: [node, producer]`` compares the producers of each node with each other.
PRODUCER = "producer"
#: A node that dies takes every producer on it at once: their last samples lie within a sampling
#: interval or two of each other. Producers that fell silent more than a third of the timeout
#: apart (an agent restarting in the middle of an evaluation pause) fell silent for different
#: reasons, and the node is not down for them.
TOGETHER = 3.0
#: The metric families a node's agent reads (its hardware); training processes send the rest.
AGENT_FAMILIES = ("gpu.", "host.")


def producer(key: SeriesKey) -> str:
    """Which process of its node sent a series: ``agent`` or ``rankN``. A batch's source is
    lost on the way to the engine (merged, reordered, recorded), so it is told from what each
    producer writes: the agent its hardware and a heartbeat without a rank, an SDK process its
    rank (``trainer`` when it has none)."""
    if key.name.startswith(AGENT_FAMILIES):
        return "agent"
    rank = key.label("rank")
    if rank is not None:
        return f"rank{rank}"
    return "agent" if key.name == HEARTBEAT else "trainer"


@dataclass(frozen=True)
class AbsenceFinding:
    """A member went silent (``down``) or was heard again (``recovered``), in data time."""

    member: int
    kind: Literal["down", "recovered"]
    silent_since: float
    detected_at: float


class Absence:
    """Tracks the last report of each member and of each of its sources, and the continuity
    of everyone's reports.

    Args:
        timeout_s: seconds of data time a member may be silent while others report.
    """

    #: Compares the series of a rule with each other (the engine feeds it every member).
    across_members: ClassVar[bool] = True

    def __init__(self, timeout_s: float = 60.0) -> None:
        if not timeout_s > 0:
            raise ValueError("timeout_s must be > 0")
        self.timeout_s = float(timeout_s)
        self._last_ts = -math.inf
        self._heard_since = -math.inf  # start of the current stretch without a gap > timeout
        self._last_seen = np.zeros(0)  # NaN for a member never heard
        self._down = np.zeros(0, dtype=bool)
        self._source_seen = np.zeros(0)  # -inf for a source never heard
        self._source_clocked = np.zeros(0, dtype=bool)  # has sent a sample on its own clock
        self._source_member = np.zeros(0, dtype=np.int64)  # -1 for a source never heard

    def update(
        self,
        ts: ArrayLike,
        member: ArrayLike,
        clocked: ArrayLike | None = None,
        source: ArrayLike | None = None,
    ) -> list[AbsenceFinding]:
        """Take one batch of sample times and members, whether each sample came on its
        producer's clock (default: all) and which source of its member sent it (default: the
        member itself); return findings in data-time order."""
        ts_arr, member_arr, clocked_arr, source_arr = self._checked(ts, member, clocked, source)
        if not ts_arr.size:
            return []
        self._grow(int(member_arr.max()) + 1, int(source_arr.max()) + 1)
        seen_before = self._source_seen.copy()
        self._source_clocked[source_arr[clocked_arr]] = True
        self._source_member[source_arr] = member_arr
        np.maximum.at(self._source_seen, source_arr, ts_arr)
        gaps = np.diff(ts_arr, prepend=self._last_ts) > self.timeout_s
        since = np.maximum.accumulate(np.where(gaps, ts_arr, self._heard_since))
        findings: list[AbsenceFinding] = []
        for m, a, b, nxt in self._silences(ts_arr, member_arr):
            window = slice(np.searchsorted(ts_arr, a, "right"), np.searchsorted(ts_arr, b, "left"))
            if not self._down[m] and self._watched(m):
                hit = ts_arr[window] > np.maximum(since[window], a) + self.timeout_s
                if hit.any() and self._together(m, a, ts_arr, source_arr, seen_before):
                    at = float(ts_arr[window][np.argmax(hit)])
                    findings.append(AbsenceFinding(m, "down", a, at))
                    self._down[m] = True
            if self._down[m] and nxt:
                findings.append(AbsenceFinding(m, "recovered", a, b))
                self._down[m] = False
        self._heard_since, self._last_ts = float(since[-1]), float(ts_arr[-1])
        return sorted(findings, key=lambda f: (f.detected_at, f.member, f.kind))

    def _watched(self, m: int) -> bool:
        """Whether a source of member ``m`` has a clock, so that its silence means something."""
        return bool((self._source_clocked & (self._source_member == m)).any())

    def _together(self, m: int, a: float, ts: Floats, source: Ints, seen_before: Floats) -> bool:
        """Whether every source of ``m`` fell silent with the rest of ``m`` (last heard at
        ``a``): within a third of ``timeout_s`` of it, as of the samples up to ``a``."""
        mine = np.flatnonzero(self._source_member == m)
        upto = ts <= a
        for q in mine.tolist():
            last = max(float(seen_before[q]), float(ts[upto & (source == q)].max(initial=-np.inf)))
            if last < a - self.timeout_s / TOGETHER:
                return False
        return True

    def _silences(self, ts: Floats, member: Ints) -> list[tuple[int, float, float, bool]]:
        """(member, silent since, heard again or +inf, whether heard again) of every silence
        that may matter: gaps longer than the timeout, and each member's silence at the end."""
        order = np.argsort(member, kind="stable")
        m_sorted, t_sorted = member[order], ts[order]
        first = np.r_[True, m_sorted[1:] != m_sorted[:-1]]
        before = np.where(first, self._last_seen[m_sorted], np.r_[np.nan, t_sorted[:-1]])
        gap = ~np.isnan(before) & (t_sorted - before > self.timeout_s)
        out = [
            (int(m), float(a), float(b), True)
            for m, a, b in zip(m_sorted[gap], before[gap], t_sorted[gap], strict=True)
        ]
        last = np.r_[m_sorted[1:] != m_sorted[:-1], True]
        self._last_seen[m_sorted[last]] = t_sorted[last]
        end = float(ts[-1])
        stale = np.flatnonzero(self._down | (end - self._last_seen > self.timeout_s))
        out += [(int(m), float(self._last_seen[m]), math.inf, False) for m in stale]
        return out

    def _checked(
        self, ts: ArrayLike, member: ArrayLike, clocked: ArrayLike | None, source: ArrayLike | None
    ) -> tuple[Floats, Ints, Bools, Ints]:
        """Validate like a detector, with integer member (and source) indexes for values."""
        member_arr = np.asarray(member)
        ts_arr, _ = _validated(ts, np.zeros(member_arr.shape), self._last_ts)
        member_arr = _indexes("member", member_arr, ts_arr.size)
        clocked_arr = np.ones(ts_arr.shape, bool) if clocked is None else np.asarray(clocked)
        if clocked_arr.shape != ts_arr.shape or clocked_arr.dtype != np.bool_:
            raise ValueError("clocked must be one boolean a sample")
        source_arr = member_arr if source is None else np.asarray(source)
        if source_arr.shape != ts_arr.shape:
            raise ValueError("source must be one index a sample")
        return ts_arr, member_arr, clocked_arr, _indexes("source", source_arr, ts_arr.size)

    def _grow(self, members: int, sources: int) -> None:
        """Widen the per-member and per-source state to these many of each."""
        extra = members - self._down.size
        if extra > 0:
            self._last_seen = np.concatenate([self._last_seen, np.full(extra, np.nan)])
            self._down = np.concatenate([self._down, np.zeros(extra, dtype=bool)])
        extra = sources - self._source_seen.size
        if extra > 0:
            self._source_seen = np.concatenate([self._source_seen, np.full(extra, -np.inf)])
            self._source_clocked = np.concatenate([self._source_clocked, np.zeros(extra, bool)])
            self._source_member = np.concatenate([self._source_member, np.full(extra, -1)])

    @property
    def down(self) -> list[int]:
        """Members down now."""
        return np.flatnonzero(self._down).tolist()

    def state_dict(self) -> dict[str, Any]:
        """Everything the next batch depends on, as JSON-ready numbers and lists."""
        return {
            "last_ts": self._last_ts,
            "heard_since": self._heard_since,
            "last_seen": self._last_seen.tolist(),
            "down": self._down.tolist(),
            "source_seen": self._source_seen.tolist(),
            "source_clocked": self._source_clocked.tolist(),
            "source_member": self._source_member.tolist(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from ``state_dict()`` output of a detector built with the same parameters."""
        if set(state) != set(self.state_dict()):
            raise ValueError(f"state keys {sorted(state)} != {sorted(self.state_dict())}")
        if len(state["last_seen"]) != len(state["down"]):
            raise ValueError("state 'last_seen' and 'down' differ in length")
        sources = {len(state[k]) for k in ("source_seen", "source_clocked", "source_member")}
        if len(sources) != 1:
            raise ValueError("state of the sources differs in length")
        self._last_ts, self._heard_since = float(state["last_ts"]), float(state["heard_since"])
        self._last_seen = np.array(state["last_seen"], dtype=np.float64)
        self._down = np.array(state["down"], dtype=bool)
        self._source_seen = np.array(state["source_seen"], dtype=np.float64)
        self._source_clocked = np.array(state["source_clocked"], dtype=bool)
        self._source_member = np.array(state["source_member"], dtype=np.int64)


def _indexes(name: str, values: np.ndarray, size: int) -> Ints:
    """Small non-negative integers, as member and source indexes must be."""
    if size and values.dtype.kind not in "iu":
        raise ValueError(f"{name} must be integers, not {values.dtype}")
    if values.size and (values.min() < 0 or values.max() >= MAX_MEMBERS):
        raise ValueError(f"{name} must be small indexes in [0, {MAX_MEMBERS})")
    return values.astype(np.int64)
