"""Absence: a member (a node) that stops reporting while the others carry on.

Fed the data time and member of every sample of the members it watches (any metric, heartbeats
included), in data-time order. A member that has reported before is ``down`` once it has been
silent for more than ``timeout_s`` of data time during which the others kept reporting without
a gap of their own longer than ``timeout_s``. So a run that ends, or a replay that stops, never
makes every node "down": silence counts only while someone else is heard (a silent node among
talking ones, not a quiet run). The default of 60 s is twelve missed 5 s heartbeats: far beyond
any ordinary jitter of sampling, and well within the two minutes in which a lost node should be
reported. A ``recovered`` finding follows when a down member reports again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike

from stepwatch.detect._base import Floats, _validated
from stepwatch.detect._peers import MAX_MEMBERS, Ints


@dataclass(frozen=True)
class AbsenceFinding:
    """A member went silent (``down``) or was heard again (``recovered``), in data time."""

    member: int
    kind: Literal["down", "recovered"]
    silent_since: float
    detected_at: float


class Absence:
    """Tracks the last report of each member and the continuity of everyone's reports.

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

    def update(self, ts: ArrayLike, member: ArrayLike) -> list[AbsenceFinding]:
        """Take one batch of sample times and members; return findings in data-time order."""
        ts_arr, member_arr = self._checked(ts, member)
        if not ts_arr.size:
            return []
        self._grow(int(member_arr.max()) + 1)
        gaps = np.diff(ts_arr, prepend=self._last_ts) > self.timeout_s
        since = np.maximum.accumulate(np.where(gaps, ts_arr, self._heard_since))
        findings: list[AbsenceFinding] = []
        for m, a, b, nxt in self._silences(ts_arr, member_arr):
            window = slice(np.searchsorted(ts_arr, a, "right"), np.searchsorted(ts_arr, b, "left"))
            if not self._down[m]:
                hit = ts_arr[window] > np.maximum(since[window], a) + self.timeout_s
                if hit.any():
                    at = float(ts_arr[window][np.argmax(hit)])
                    findings.append(AbsenceFinding(m, "down", a, at))
                    self._down[m] = True
            if self._down[m] and nxt:
                findings.append(AbsenceFinding(m, "recovered", a, b))
                self._down[m] = False
        self._heard_since, self._last_ts = float(since[-1]), float(ts_arr[-1])
        return sorted(findings, key=lambda f: (f.detected_at, f.member, f.kind))

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

    def _checked(self, ts: ArrayLike, member: ArrayLike) -> tuple[Floats, Ints]:
        """Validate like a detector, with integer member indexes instead of values."""
        member_arr = np.asarray(member)
        ts_arr, _ = _validated(ts, np.zeros(member_arr.shape), self._last_ts)
        if ts_arr.size and member_arr.dtype.kind not in "iu":
            raise ValueError(f"member must be integers, not {member_arr.dtype}")
        if member_arr.size and (member_arr.min() < 0 or member_arr.max() >= MAX_MEMBERS):
            raise ValueError(f"member must be small indexes in [0, {MAX_MEMBERS})")
        return ts_arr, member_arr.astype(np.int64)

    def _grow(self, size: int) -> None:
        """Widen the per-member state to ``size`` members."""
        extra = size - self._down.size
        if extra > 0:
            self._last_seen = np.concatenate([self._last_seen, np.full(extra, np.nan)])
            self._down = np.concatenate([self._down, np.zeros(extra, dtype=bool)])

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
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from ``state_dict()`` output of a detector built with the same parameters."""
        if set(state) != set(self.state_dict()):
            raise ValueError(f"state keys {sorted(state)} != {sorted(self.state_dict())}")
        if len(state["last_seen"]) != len(state["down"]):
            raise ValueError("state 'last_seen' and 'down' differ in length")
        self._last_ts, self._heard_since = float(state["last_ts"]), float(state["heard_since"])
        self._last_seen = np.array(state["last_seen"], dtype=np.float64)
        self._down = np.array(state["down"], dtype=bool)
