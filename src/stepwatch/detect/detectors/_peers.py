"""Peer comparison: one member's value against the median of the other members at the same step.

A rank (or node) is judged against its peers, not its own past: a straggler is a rank whose
compute time is well above the median of the other ranks' at the same step, the relative score
of NVIDIA's straggler detection (the median, so one slow rank cannot move its own yardstick).
The default ``ratio`` of 1.25 (a relative speed below 0.8) sits far above the few per cent of
per-step jitter between healthy ranks, and it is the smallest slow-down worth a person's time:
synchronous training runs every rank at the straggler's pace, so 25 % on one rank is 25 % on
the whole job. Like Minder's continuity check, a member is flagged only after ``min_steps``
decided steps above the ratio in a row, so one slow step is never a straggler; one step in ten
may dip below it (``min_steps`` of the last ``min_steps`` and a tenth more), so heavy-tailed
noise about a real slow-down does not keep resetting the count. Once flagged, a member stays
flagged while most (more than half) of its last ``min_steps`` judged steps are above, so one
noisy step of a member near the ratio does not end its finding (and restart a rule's ``for``).
A step a member did not report, or that could not be judged (too few members, a non-finite
value), neither counts nor breaks either run. When every member slows together (an evaluation
pause, a checkpoint) the peers' median rises with them and the ratio stays near 1: such pauses
cannot alert by construction.

When steps complete: samples of one metric arrive in data-time order, a step's samples from all
members close together. A step is decided at the first sample of a later step if every member
seen so far reported it, or else once a majority of the members seen so far have reported a
later step and data time is ``SKEW_S`` past the step's last sample (a member that died or lags
does not hold its peers' verdicts back, and one whose clock is a second behind is not left
out). Should most members fall silent, at most ``MAX_PENDING`` steps wait before the oldest is
decided with whoever reported it (too few to judge, as a rule: a lost node is ``Absence``'s
finding, not a peer's).
Steps are decided in order; a sample of a step already decided is late and only counted.
Undecided steps are kept between batches, so the output does not depend on how the stream is cut
into batches. Samples without a step (``step == -1``) are grouped into ``bucket_s`` buckets of
data time instead; one detector takes one kind. A member's samples in one step or bucket are
averaged; non-finite values count as reported but are not judged; ratios need positive values.

Which metric: stragglers are judged on compute time. When one rank is slow its peers wait for it
inside the collective, so their communication time rises while its own does not; on compute time
only the slow rank stands out. Collective slowness of a node (``sync_latency``) is judged on
the node's communication time (the median over its ranks at each step, members being nodes),
against the other nodes here, and against its own past by a ``Cusum`` or ``RobustZ`` on the same
per-node series. A rule wants both: a node that is always a little slower (its place in the
topology) has not changed, and when every node waits on a straggler none stands out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._base import Bools, Direction, Floats, Verdict, _validated, check_direction, directed

Ints = NDArray[np.int64]
MAX_MEMBERS = 1 << 16  # member indexes are small ints (ranks or nodes), not ids
MAX_PENDING = 64  # steps that may wait for their members before the oldest is decided as it is
#: Clock skew between members: ±1 s between two nodes puts their samples of a step 2 s apart.
SKEW_S = 2.0
_SUM, _FINITE, _SEEN, _TS = range(4)  # the rows of one pending step's per-member table


@dataclass(frozen=True)
class PeerVerdict(Verdict):
    """One row per member and decided step; ``score`` is the directed ratio, ``step`` is -1 for
    time buckets, and ``ts`` is the member's last sample in the step."""

    ts: Floats
    step: Ints
    member: Ints
    value: Floats
    peer_median: Floats
    ratio: Floats
    streak: Ints


class PeerComparison:
    """Flags members whose value stays ``ratio`` times their peers' median for ``min_steps``.

    Args:
        ratio: how far from the peers' median counts (in ``direction``), > 1.
        min_steps: decided steps above ``ratio`` (one in ten may dip) before a member is anomalous.
        min_members: members that must report a step (self included) for it to be judged.
        bucket_s: bucket width in seconds for samples that carry no step.
        direction: ``up`` (slower, more time), ``down`` (less throughput) or ``both``.
    """

    #: Compares the series of a rule with each other (the engine feeds it every member).
    across_members: ClassVar[bool] = True

    def __init__(
        self,
        ratio: float = 1.25,
        min_steps: int = 10,
        min_members: int = 3,
        bucket_s: float = 10.0,
        direction: Direction = "up",
    ) -> None:
        check_direction(direction)
        if not ratio > 1 or min_steps < 1 or min_members < 2 or not bucket_s > 0:
            raise ValueError("ratio must be > 1, min_steps >= 1, min_members >= 2, bucket_s > 0")
        self.ratio, self.min_steps, self.min_members = float(ratio), int(min_steps), min_members
        self.bucket_s, self.direction = float(bucket_s), direction
        self._last_ts = -math.inf
        self._mode = ""
        self._known = np.zeros(0, dtype=bool)
        self._latest = np.zeros(0)
        self._streak = np.zeros(0, dtype=np.int64)
        self._span = self.min_steps + self.min_steps // 10  # min_steps slow ones, a tenth may dip
        self._recent = np.zeros((self._span, 0))  # the last judged steps: 1 above, 0 not
        self._flagged = np.zeros(0, dtype=bool)
        self._decided = -math.inf
        self._pending: dict[int, Floats] = {}
        self._late = 0

    @property
    def late_samples(self) -> int:
        """Samples that arrived after their step was decided (counted, not judged)."""
        return self._late

    def update(
        self, ts: ArrayLike, step: ArrayLike | None, member: ArrayLike, value: ArrayLike
    ) -> PeerVerdict:
        """Take one batch of one metric across members; return the rows decided by it."""
        ts_arr, value_arr = _validated(ts, value, self._last_ts)
        key, member_arr = self._keys(ts_arr, step, member)
        if ts_arr.size:
            self._last_ts = float(ts_arr[-1])
            self._grow(int(member_arr.max()) + 1)
        bounds = [0, *(np.flatnonzero(np.diff(key)) + 1).tolist(), key.size] if key.size else []
        if (orderly := self._orderly(key, bounds, ts_arr, member_arr, value_arr)) is not None:
            return self._judge(orderly)
        decided: list[tuple[int, Floats]] = []
        for a, b in zip(bounds, bounds[1:], strict=False):
            run = slice(a, b)
            decided += self._ingest(int(key[a]), ts_arr[run], member_arr[run], value_arr[run])
        return self._judge(decided)

    def _keys(self, ts: Floats, step: ArrayLike | None, member: ArrayLike) -> tuple[Ints, Ints]:
        """Validate step and member; the grouping key is the step or the time bucket."""
        step_arr = np.full(ts.shape, -1) if step is None else np.asarray(step)
        member_arr = np.asarray(member)
        if step_arr.shape != ts.shape or member_arr.shape != ts.shape:
            raise ValueError(
                f"ts {ts.shape}, step {step_arr.shape} and member {member_arr.shape} "
                "must be equal 1-D shapes"
            )
        for name, arr in (("step", step_arr), ("member", member_arr)):
            if arr.size and arr.dtype.kind not in "iu":
                raise ValueError(f"{name} must be integers, not {arr.dtype}")
        if member_arr.size and (member_arr.min() < 0 or member_arr.max() >= MAX_MEMBERS):
            raise ValueError(f"member must be small indexes in [0, {MAX_MEMBERS})")
        if not ts.size:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        has_step = step_arr >= 0
        mode = "step" if has_step[0] else "time"
        if has_step.any() != has_step.all() or self._mode not in ("", mode):
            raise ValueError("one detector takes samples with steps or without (step -1), not both")
        self._mode = mode
        key = step_arr if mode == "step" else np.floor(ts / self.bucket_s)
        return key.astype(np.int64), member_arr.astype(np.int64)

    def _orderly(
        self, key: Ints, bounds: list[int], ts: Floats, member: Ints, value: Floats
    ) -> list[tuple[int, Floats]] | None:
        """The usual stream at numpy speed: steps in order, each complete before the next
        begins. Then every step but the last is decided as the next one starts, exactly as
        ``_ingest`` would decide it; None when the batch is not like that."""
        runs = len(bounds) - 1
        if runs < 2 or key[0] <= self._decided or bool((np.diff(key) < 0).any()):
            return None
        first = int(key[0])
        earlier = sorted(k for k in self._pending if k < first)
        if len(self._pending) - len(earlier) > (first in self._pending):
            return None  # a pending step later than the batch's first
        lengths = np.diff(bounds)
        run = np.repeat(np.arange(runs), lengths)
        tables = np.zeros((runs, 4, self._known.size))
        tables[:, _TS] = np.nan
        if first in self._pending:
            tables[0] = self._pending[first]
        finite = np.isfinite(value)
        np.add.at(tables[:, _SUM], (run[finite], member[finite]), value[finite])
        np.add.at(tables[:, _FINITE], (run[finite], member[finite]), 1.0)
        np.add.at(tables[:, _SEEN], (run, member), 1.0)
        np.fmax.at(tables[:, _TS], (run, member), ts)
        known = self._known.copy()
        known[member] = True
        reported = tables[:-1, _SEEN][:, known] > 0
        if not reported.all():
            return None  # a step without some member: let the general path judge it
        first_is_new = not self._known[member[0]]
        if earlier and (
            first_is_new
            or not all((self._pending[k][_SEEN][self._known] > 0).all() for k in earlier)
        ):
            return None
        decided = [(k, self._pending.pop(k)) for k in earlier]
        self._pending.pop(first, None)
        keys = key[np.asarray(bounds[:-1])].tolist()
        decided += list(zip(keys[:-1], tables[:-1], strict=True))
        self._pending[keys[-1]] = tables[-1]
        self._known = known
        np.maximum.at(self._latest, member, key.astype(np.float64))
        self._decided = decided[-1][0]
        return decided

    def _grow(self, size: int) -> None:
        """Widen the per-member state to ``size`` members."""
        extra = size - self._known.size
        if extra <= 0:
            return
        self._known = np.concatenate([self._known, np.zeros(extra, dtype=bool)])
        self._latest = np.concatenate([self._latest, np.full(extra, -np.inf)])
        self._streak = np.concatenate([self._streak, np.zeros(extra, dtype=np.int64)])
        self._recent = np.hstack([self._recent, np.zeros((self._span, extra))])
        self._flagged = np.concatenate([self._flagged, np.zeros(extra, dtype=bool)])
        for key, table in self._pending.items():
            pad = np.zeros((4, extra))
            pad[_TS] = np.nan
            self._pending[key] = np.concatenate([table, pad], axis=1)

    def _ingest(
        self, key: int, ts: Floats, member: Ints, value: Floats
    ) -> list[tuple[int, Floats]]:
        """Add one run of samples of one step; return the earlier steps it lets us decide."""
        if key <= self._decided:
            self._late += ts.size
            self._known[member] = True  # a member whose first samples came late is one all the same
            return []
        earlier = sorted(k for k in self._pending if k < key)
        first_is_new = not self._known[member[0]]
        everyone = [
            not first_is_new and bool((self._pending[k][_SEEN][self._known] > 0).all())
            for k in earlier
        ]
        table = self._pending.get(key)
        if table is None:
            table = np.zeros((4, self._known.size))
            table[_TS] = np.nan
            self._pending[key] = table
        finite = np.isfinite(value)
        np.add.at(table[_SUM], member[finite], value[finite])
        np.add.at(table[_FINITE], member[finite], 1.0)
        np.add.at(table[_SEEN], member, 1.0)
        np.fmax.at(table[_TS], member, ts)
        self._known[member] = True
        self._latest[member] = np.maximum(self._latest[member], key)
        return self._decide(earlier, everyone, float(ts[-1]))

    def _decide(
        self, earlier: list[int], everyone: list[bool], now: float
    ) -> list[tuple[int, Floats]]:
        """Decide waiting steps in order: all members in, a majority moved on (and data time
        is ``SKEW_S`` past the step's last sample), or too many wait."""
        latest = self._latest[self._known]
        count = 0
        for k, all_in in zip(earlier, everyone, strict=True):
            moved_on = 2 * np.count_nonzero(latest > k) > latest.size
            if not (all_in or (moved_on and now - np.nanmax(self._pending[k][_TS]) > SKEW_S)):
                break
            count += 1
        count = max(count, len(self._pending) - MAX_PENDING)
        decided = [(k, self._pending.pop(k)) for k in sorted(self._pending)[:count]]
        if decided:
            self._decided = decided[-1][0]
        return decided

    def _judge(self, decided: list[tuple[int, Floats]]) -> PeerVerdict:
        """Ratios, streaks and decisions of the decided steps, one row per reporting member."""
        size = self._known.size
        tables = np.stack([t for _, t in decided]) if decided else np.zeros((0, 4, size))
        with np.errstate(divide="ignore", invalid="ignore"):
            vals = np.where(tables[:, _FINITE] > 0, tables[:, _SUM] / tables[:, _FINITE], np.nan)
            median = _others_median(vals)
            enough = np.isfinite(vals).sum(axis=1, keepdims=True) >= self.min_members
            ratio = np.where(enough & (median > 0) & (vals > 0), vals / median, np.nan)
            score = np.exp(directed(np.log(ratio), self.direction))
        above = score >= self.ratio
        judged = np.isfinite(score)
        streak = _streaks(above, judged & ~above, self._streak)
        (enter, stay), self._recent = _recent_above(
            above, judged, self._recent, (self._span, self.min_steps)
        )
        entered = above & (enter >= self.min_steps)
        flagged = _flagged(entered, 2 * stay > self.min_steps, self._flagged)
        if decided:
            self._streak, self._flagged = streak[-1].copy(), flagged[-1].copy()
        keys = np.array([k for k, _ in decided], dtype=np.int64)
        rows = tables[:, _SEEN] > 0
        step = np.broadcast_to(keys[:, None] if self._mode == "step" else -1, rows.shape)
        return PeerVerdict(
            score=score[rows],
            anomalous=flagged[rows],
            ts=tables[:, _TS][rows],
            step=step[rows].astype(np.int64),
            member=np.broadcast_to(np.arange(size, dtype=np.int64), rows.shape)[rows],
            value=vals[rows],
            peer_median=median[rows],
            ratio=ratio[rows],
            streak=streak[rows],
        )

    def state_dict(self) -> dict[str, Any]:
        """Everything the next batch depends on, as JSON-ready numbers and lists."""
        keys = sorted(self._pending)
        return {
            "last_ts": self._last_ts,
            "mode": self._mode,
            "known": self._known.tolist(),
            "latest": self._latest.tolist(),
            "streak": self._streak.tolist(),
            "recent": self._recent.tolist(),
            "flagged": self._flagged.tolist(),
            "decided": self._decided,
            "pending_keys": keys,
            "pending": [self._pending[k].tolist() for k in keys],
            "late": self._late,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from ``state_dict()`` output of a detector built with the same parameters."""
        expected = set(self.state_dict())
        if set(state) != expected:
            raise ValueError(f"state keys {sorted(state)} != {sorted(expected)}")
        known = np.array(state["known"], dtype=bool)
        pending = [np.array(t, dtype=np.float64).reshape(4, known.size) for t in state["pending"]]
        if len(pending) != len(state["pending_keys"]):
            raise ValueError("state 'pending' and 'pending_keys' differ in length")
        self._last_ts, self._mode = float(state["last_ts"]), str(state["mode"])
        self._known = known
        self._latest = np.array(state["latest"], dtype=np.float64).reshape(known.size)
        self._streak = np.array(state["streak"], dtype=np.int64).reshape(known.size)
        recent = np.array(state["recent"], dtype=np.float64)
        self._recent = recent.reshape(self._span, known.size)
        self._flagged = np.array(state["flagged"], dtype=bool).reshape(known.size)
        self._decided = float(state["decided"])
        self._pending = dict(zip((int(k) for k in state["pending_keys"]), pending, strict=True))
        self._late = int(state["late"])


def _others_median(vals: Floats) -> Floats:
    """Each finite cell's median of the other finite cells of its row (NaN when it has none)."""
    steps, size = vals.shape
    order = np.argsort(vals, axis=1)  # NaN sorts last
    ordered = np.take_along_axis(vals, order, axis=1)
    pos = np.empty_like(order)
    np.put_along_axis(pos, order, np.broadcast_to(np.arange(size), (steps, size)), axis=1)
    others = np.isfinite(vals).sum(axis=1, keepdims=True) - 1

    def pick(j: NDArray[np.int64]) -> Floats:
        index = np.clip(j + (j >= pos), 0, max(size - 1, 0))
        return np.take_along_axis(ordered, index, axis=1)

    median = 0.5 * (pick((others - 1) // 2) + pick(others // 2))
    return np.where(np.isfinite(vals) & (others >= 1), median, np.nan)


def _streaks(above: Bools, below: Bools, start: NDArray[np.int64]) -> NDArray[np.int64]:
    """Consecutive steps above, per member; a missing step neither counts nor breaks the run."""
    count = np.cumsum(above, axis=0)
    reset = np.maximum.accumulate(np.where(below, count, -1), axis=0)
    return np.where(reset >= 0, count - reset, start + count).astype(np.int64)


def _recent_above(
    above: Bools, judged: Bools, ring: Floats, sizes: tuple[int, ...]
) -> tuple[list[Floats], Floats]:
    """Per step and member, how many of the member's last ``n`` judged steps (up to that
    step) were above, for each ``n`` of ``sizes`` (at most the ring's length); and the new
    ring. An unjudged step carries the counts before it."""
    size, steps = ring.shape[0], above.shape[0]
    order = np.argsort(~judged, axis=0, kind="stable")  # each member's judged steps first
    history = np.vstack([ring, np.take_along_axis(above & judged, order, axis=0)])
    total = np.vstack([np.zeros((1, ring.shape[1])), np.cumsum(history, axis=0)])
    seen = np.cumsum(judged, axis=0)
    at = np.maximum(seen - 1, 0)
    counts = []
    for n in sizes:
        window = total[size + 1 : size + 1 + steps] - total[size + 1 - n : size + 1 - n + steps]
        picked = np.take_along_axis(window, at, axis=0) if steps else window
        counts.append(np.where(seen > 0, picked, ring[size - n :].sum(axis=0)))
    last = seen[-1] if steps else np.zeros(ring.shape[1], dtype=np.int64)
    return counts, np.take_along_axis(history, last + np.arange(size)[:, None], axis=0)


def _flagged(enter: Bools, stay: Bools, before: Bools) -> Bools:
    """Flagged from a step that ``enter``s until the first step that does not ``stay``
    (``before``: flagged at the end of the previous batch)."""
    index = np.arange(enter.shape[0])[:, None]
    broken = np.maximum.accumulate(np.where(~stay, index, -1), axis=0)
    entered = np.maximum.accumulate(np.where(enter, index, -1), axis=0)
    return stay & ((entered > broken) | ((broken < 0) & before))
