"""The run a framework callback logs to: the one it was given, or one it starts and finishes."""

from __future__ import annotations

from typing import Any

from ..model import RunStatus
from ..sdk import Run, current_run, finish, init

__all__ = ["RunOwner"]


class RunOwner:
    """Holds the given run, or starts one from the framework's defaults under the user's kwargs."""

    def __init__(self, run: Run | None, init_kwargs: dict[str, Any]) -> None:
        self._given, self._init_kwargs = run, init_kwargs
        self.run: Run | None = run

    def start(self, **defaults: Any) -> Run:
        """The run to log to; a new one (made current) unless one was given."""
        if self._given is not None:
            return self._given
        labels = {**defaults.pop("labels", {}), **self._init_kwargs.get("labels", {})}
        self.run = init(**{**defaults, **self._init_kwargs, "labels": labels})
        return self.run

    def end(self, status: str = RunStatus.FINISHED) -> None:
        """Finish the run if this callback started it (a given run is the caller's to finish)."""
        run = self.run
        if run is None or run is self._given or run.finished:
            return
        if current_run() is run:
            finish(status)
        else:
            run.finish(status)
