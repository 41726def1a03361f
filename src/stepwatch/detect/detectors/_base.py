"""The detector contract: column batches in data time, one verdict per sample, O(1) state."""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

Floats = NDArray[np.float64]
Bools = NDArray[np.bool_]
Direction = Literal["up", "down", "both"]
DIRECTIONS: tuple[str, ...] = ("up", "down", "both")

# One decay step never forgets more than e**-40 (below float64 resolution), and one chunk of the
# closed-form recursion spans at most e**300 of decay, so the rescaled sums stay far from overflow.
_MAX_LOG_STEP = 40.0
_MAX_LOG_SPAN = 300.0


@dataclass(frozen=True)
class Verdict:
    """Per-sample output of a detector: how anomalous (larger is worse) and the decision."""

    score: Floats
    anomalous: Bools


@dataclass(frozen=True)
class BaselineVerdict(Verdict):
    """A verdict with what each value was judged against (a level, a best, a reference), for
    an alert to say: the value, and the baseline it left."""

    baseline: Floats


V = TypeVar("V", bound=Verdict)


@dataclass(frozen=True, slots=True)
class Warmup:
    """A detector still gathering the baseline it judges against: ``seen`` of the ``needed``
    samples (or seconds of data, ``unit`` "s"); until then it says nothing, and should say so."""

    seen: float
    needed: float
    unit: str = "samples"

    def text(self) -> str:
        return f"warming up, {self.seen:g} of {self.needed:g} {self.unit}"


class Detector(ABC):
    """Validates a batch, hides non-finite samples from the maths and round-trips its state.

    A subclass implements only ``_score`` over finite samples and lists its state attributes in
    ``_state_keys``. Non-finite samples never reach ``_score`` (so they never enter a baseline);
    their verdict is NaN for float fields and False for bool fields, unless the class sets
    ``skips_nonfinite = False``.
    """

    skips_nonfinite: ClassVar[bool] = True
    _state_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self._last_ts = -math.inf

    def update(self, ts: ArrayLike, value: ArrayLike) -> Verdict:
        """Score one batch of one series; ts in seconds, non-decreasing across batches."""
        ts_arr, value_arr = _validated(ts, value, self._last_ts)
        if ts_arr.size:
            self._last_ts = float(ts_arr[-1])
        finite = np.isfinite(value_arr)
        if not self.skips_nonfinite or finite.all():
            return self._score(ts_arr, value_arr)
        return _expanded(self._score(ts_arr[finite], value_arr[finite]), finite)

    @abstractmethod
    def _score(self, ts: Floats, value: Floats) -> Verdict:
        """The detector's maths over a validated batch (finite values unless told otherwise)."""

    def warming_up(self) -> Warmup | None:
        """How far the baseline is while the detector cannot judge yet; None once it can."""
        return None

    def _state_names(self) -> tuple[str, ...]:
        """The attributes the next batch depends on: ``_state_keys``, unless the parameters
        leave some unused."""
        return self._state_keys

    def state_dict(self) -> dict[str, Any]:
        """Everything the next batch depends on, as JSON-ready numbers and lists (no parameters)."""
        state = {key: _plain(getattr(self, key)) for key in self._state_names()}
        state["last_ts"] = self._last_ts
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from ``state_dict()`` output of a detector built with the same parameters."""
        expected = {*self._state_names(), "last_ts"}
        if set(state) != expected:
            raise ValueError(f"state keys {sorted(state)} != {sorted(expected)}")
        for key in self._state_names():
            current, new = getattr(self, key), state[key]
            if np.shape(current) != np.shape(new):
                raise ValueError(
                    f"state {key!r} has shape {np.shape(new)}, not {np.shape(current)}"
                )
            if isinstance(current, np.ndarray):
                setattr(self, key, np.array(new, dtype=np.float64))
            else:
                setattr(self, key, type(current)(new))
        self._last_ts = float(state["last_ts"])


def _plain(item: Any) -> Any:
    return item.tolist() if isinstance(item, np.ndarray) else item


def _validated(ts: ArrayLike, value: ArrayLike, last_ts: float) -> tuple[Floats, Floats]:
    ts_arr = np.asarray(ts, dtype=np.float64)
    value_arr = np.asarray(value, dtype=np.float64)
    if ts_arr.ndim != 1 or ts_arr.shape != value_arr.shape:
        raise ValueError(f"ts {ts_arr.shape} and value {value_arr.shape} must be equal 1-D shapes")
    if not np.isfinite(ts_arr).all():
        raise ValueError("ts must be finite")
    if ts_arr.size and (ts_arr[0] < last_ts or np.any(np.diff(ts_arr) < 0)):
        raise ValueError(f"ts must be non-decreasing (previous batch ended at {last_ts})")
    return ts_arr, value_arr


def _expanded(part: V, keep: Bools) -> V:
    """Scatter a verdict over the kept samples back to the whole batch."""
    fields = {}
    for field in dataclasses.fields(part):
        inner = getattr(part, field.name)
        fill: Any = False if inner.dtype == np.bool_ else np.nan
        full = np.full(keep.shape, fill, dtype=inner.dtype)
        full[keep] = inner
        fields[field.name] = full
    return dataclasses.replace(part, **fields)


def check_direction(direction: str) -> None:
    """Reject a direction other than up, down or both."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")


def directed(signed: Floats, direction: str) -> Floats:
    """Turn a signed statistic into a score where larger means worse in ``direction``."""
    if direction == "up":
        return signed
    if direction == "down":
        return -signed
    return np.abs(signed)


def decayed_cumsum(f: Floats, log_decay: Floats, init: Floats) -> Floats:
    """Rows of ``S_j = exp(log_decay_j) * S_{j-1} + f_j`` from ``S_{-1} = init``, without a loop.

    The closed form ``S_j = e^{L_j} (init + sum_k e^{-L_k} f_k)`` with ``L`` the cumulative decay is
    evaluated in chunks short enough that ``e^{-L}`` cannot overflow.
    """
    rows = np.atleast_2d(f)
    out = np.empty_like(rows, dtype=np.float64)
    cum = np.cumsum(np.maximum(log_decay, -_MAX_LOG_STEP))
    carry = np.asarray(init, dtype=np.float64).reshape(-1)
    start, base = 0, 0.0
    while start < rows.shape[1]:
        stop = int(np.searchsorted(-cum, _MAX_LOG_SPAN - base, side="right"))
        stop = max(stop, start + 1)
        grow = np.exp(base - cum[start:stop])
        chunk = out[:, start:stop]
        np.multiply(rows[:, start:stop], grow, out=chunk)
        np.cumsum(chunk, axis=1, out=chunk)
        chunk += carry[:, None]
        chunk /= grow
        carry, base, start = out[:, stop - 1], float(cum[stop - 1]), stop
    return out


def ewm_before(x: Floats, weight: Floats, log_decay: Floats, sums: Floats) -> tuple[Floats, Floats]:
    """The weighted mean each sample sees before it is added, and the sums after the batch.

    ``sums`` is ``[sum of w*x, sum of w]`` under the decay; the mean is bias-free from the
    first sample on (no starting value to choose). A sample of weight 0 does not age the mean.
    """
    both = decayed_cumsum(np.vstack([x * weight, weight]), log_decay * (weight > 0), sums)
    prior = np.concatenate([sums[:, None], both[:, :-1]], axis=1)[:, : x.size]
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = prior[0] / prior[1]
    return np.where(prior[1] > 0, mean, np.nan), both[:, -1] if x.size else sums.copy()
