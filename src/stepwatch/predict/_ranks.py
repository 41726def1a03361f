"""Which of a metric's series speaks for a run when each rank sends its own: rank 0's, or the
lowest rank's. The forecast route and forecasts over recorded runs choose alike."""

from __future__ import annotations

__all__ = ["rank_order"]

#: Where a rank label that is no number stands: after every numbered rank.
_UNNUMBERED = 1 << 62


def rank_order(rank: str | None) -> int:
    """The order of a series by its ``rank`` label, the one to read first: a series of no rank
    (the run's own), then ranks from 0 up, then ranks that are no number."""
    if rank is None:
        return -1
    return int(rank) if rank.isdigit() else _UNNUMBERED
