"""When each run was last heard from, so that a run that goes quiet without finishing does not
keep its detection state for the collector's lifetime."""

from __future__ import annotations

from collections.abc import Callable

from ...model import SampleBatch

__all__ = ["IDLE_RUN_S", "IdleRuns"]

#: Wall seconds without a sample after which a run that never finished counts as gone: far
#: beyond an evaluation or a checkpoint pause, well within a collector's lifetime.
IDLE_RUN_S = 6 * 3600.0


class IdleRuns:
    """The wall time (``monotonic``) of each run's latest batch; costs a batch's keys to note."""

    def __init__(self, idle_s: float, monotonic: Callable[[], float]) -> None:
        if not idle_s > 0:
            raise ValueError("idle_s must be > 0")
        self.idle_s, self._monotonic = idle_s, monotonic
        self._heard: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._heard)

    def heard(self, batch: SampleBatch) -> None:
        """Note the runs of a batch's series as heard now."""
        runs = {run for key in batch.keys if (run := key.label("run")) is not None}
        if runs:
            self._heard.update(dict.fromkeys(runs, self._monotonic()))

    def forget(self, run: str) -> None:
        self._heard.pop(run, None)

    def idle(self) -> list[str]:
        """The runs not heard from for ``idle_s``."""
        now = self._monotonic()
        return [run for run, at in self._heard.items() if now - at >= self.idle_s]
