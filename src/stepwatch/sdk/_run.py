"""The Run: what training code holds to log metrics, time steps and record events.

``log`` only validates and appends to an in-memory buffer; a background thread
makes the buffer durable in the spool every ``flush_interval_s`` and a second
one ships the spool to the collector, so the training thread never waits on
disk or network.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

from .._encryption import EncryptionKey
from .._text import plural
from .._tls import ClientTls
from ..model import MAX_INT64, NO_STEP, RECORD_KINDS, RunStatus, SeriesKey, validate_label
from ..model import Run as RunRecord
from ..spool import RUN_FILE, Connect, Sealer, write_run
from ._env import new_source_id, resolve
from ._pipeline import Pipeline
from ._registry import track, untrack
from ._timer import StepTimer
from ._values import as_float, as_step

__all__ = ["Run"]

log = logging.getLogger("stepwatch.sdk")

#: Series labels that differ between the processes of one run, so they are not run labels.
_PER_PROCESS = frozenset({"run", "node", "rank", "local_rank", "gpu"})


def _json_dict(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """A JSON-safe copy of the config (values JSON cannot hold become strings)."""
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    return dict(json.loads(json.dumps(dict(config or {}), default=str)))


class Run:
    """One process's handle on a training run (see ``stepwatch.init`` for the arguments).

    The keyword-only arguments are the OS boundaries: the environment mapping,
    the host name, the wall and step clocks, and the HTTP connection factory; and the key
    that seals the spool (default: from $STEPWATCH_ENCRYPTION_KEY_FILE or _KEY).
    """

    def __init__(
        self,
        project: str = "default",
        name: str | None = None,
        config: Mapping[str, Any] | None = None,
        server: str | None = None,
        dir: str | os.PathLike[str] | None = None,
        run_id: str | None = None,
        labels: Mapping[str, object] | None = None,
        flush_interval_s: float = 1.0,
        flush_samples: int = 50_000,
        max_spool_bytes: int | None = None,
        token: str | None = None,
        planned_total_steps: int | None = None,
        heartbeat_s: float | None = 5.0,
        tls: ClientTls | None = None,
        transport: str | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        hostname: str | None = None,
        wall_clock: Callable[[], float] = time.time,
        perf_clock: Callable[[], float] = time.perf_counter,
        connect: Connect | None = None,
        encryption_key: EncryptionKey | None = None,
    ) -> None:
        settings = resolve(
            run_id=run_id,
            server=server,
            dir=dir,
            labels=labels,
            token=token,
            environ=os.environ if environ is None else environ,
            hostname=hostname or socket.gethostname(),
            wall=wall_clock,
            tls=tls,
            max_spool_bytes=max_spool_bytes,
            transport=transport,
        )
        self.id, self.server, self.labels = settings.run_id, settings.server, settings.labels
        self.token = settings.token  # for other clients of the collector (training control)
        self.tls = settings.tls
        self.source = new_source_id(os.getpid())
        self.spool_dir: Path = settings.root / self.id / self.source
        key = encryption_key or settings.key
        self._sealer = Sealer(key) if key else None
        self._wall = wall_clock
        self._leader = self.labels.get("rank", "0") == "0"
        self._record = RunRecord(
            id=self.id,
            project=project,
            name=name or "",
            config=_json_dict(config),
            start=wall_clock(),
            labels={k: v for k, v in self.labels.items() if k not in _PER_PROCESS},
            planned_total_steps=planned_total_steps,
        )
        if self._leader or not (self.spool_dir.parent / RUN_FILE).exists():
            write_run(self.spool_dir.parent, self._record, self._sealer)
        self._timer = StepTimer(self._log_timed, perf_clock)
        #: The step ``log()`` records at when given none: the last ``run.step(i)``, or the
        #: optimizer step in progress under ``watch()``; None (before either) records no step.
        self.current_step: int | None = None
        self._cache: dict[object, int] = {}
        self._label_caches: dict[tuple[tuple[str, object], ...], dict[object, int]] = {}
        self._finish_lock = threading.Lock()
        self.finished = False
        self._pipeline = Pipeline(
            self.spool_dir,
            self.source,
            self.labels,
            server=settings.server,
            token=settings.token,
            tls=settings.tls,
            transport=settings.transport,
            run=lambda: self._record,
            flush_interval_s=flush_interval_s,
            flush_samples=flush_samples,
            max_spool_bytes=settings.max_spool_bytes,
            heartbeat_s=heartbeat_s,
            wall=wall_clock,
            connect=connect,
            sealer=self._sealer,
            orphans=settings.root if settings.ship_orphans else None,
        )
        track(self)

    @property
    def durable_samples(self) -> int:
        """Samples logged so far that are durably written to the spool."""
        return self._pipeline.durable_samples

    @property
    def dropped_samples(self) -> int:
        """Samples lost because the spool was full (or unwritable)."""
        return self._pipeline.dropped_samples

    @property
    def max_spool_bytes(self) -> int | None:
        """The cap of this run's spool in force, in bytes (None: none)."""
        return self._pipeline.spool.max_bytes

    def log(
        self,
        data: Mapping[str, object],
        step: int | None = None,
        labels: Mapping[str, object] | None = None,
    ) -> None:
        """Record ``{name: value}`` at ``step``; bad input raises here and records nothing.

        Args:
            data: metric names (``loss`` means ``train.loss``) to numbers: int,
                float, numpy scalars or one-element tensors; NaN and Inf are kept.
            step: the optimizer step; None: ``current_step`` (the step in progress
                under ``watch()``), or no step outside it.
            labels: extra labels for these samples (added to the run's).
        """
        if self.finished:
            raise RuntimeError(
                f"run {self.id!r} is finished: start a new one with stepwatch.init()"
            )
        cache = self._cache if labels is None else self._labels_cache(labels)
        try:
            items = data.items()
        except AttributeError:
            kind = type(data).__name__
            raise TypeError(f"log() takes a dict of name -> value, got {kind}") from None
        series: list[int] = []
        values: list[float] = []
        for key, value in items:
            sid = cache.get(key)
            if sid is None:
                sid = self._intern(cache, key, labels)
            series.append(sid)
            values.append(value if type(value) is float else as_float(key, value))
        if step is None:
            stamp = NO_STEP if self.current_step is None else self.current_step
        elif type(step) is int and 0 <= step <= MAX_INT64:
            stamp = step  # what as_step returns for it, without its checks
        else:
            stamp = as_step(step)
        self._pipeline.append(series, values, self._wall(), stamp)

    def _labels_cache(self, labels: Mapping[str, object]) -> dict[object, int]:
        try:
            signature = tuple(labels.items())
            cache = self._label_caches.get(signature)
        except (AttributeError, TypeError):
            raise TypeError("labels must be a dict of str -> str | int") from None
        if cache is None:
            for key, value in signature:
                validate_label(key, value)
            cache = self._label_caches[signature] = {}
        return cache

    def _intern(
        self, cache: dict[object, int], key: object, labels: Mapping[str, object] | None
    ) -> int:
        merged: Mapping[str, object] = self.labels
        if labels is not None:
            merged = {**self.labels, **labels, "run": self.id}
        if not isinstance(key, str):
            raise TypeError(f"metric name must be a str, got {type(key).__name__}: {key!r:.40}")
        sid = cache[key] = self._pipeline.intern(SeriesKey.of(key, merged))
        return sid

    def step(self, step: int) -> AbstractContextManager[None]:
        """``with run.step(i):`` records ``train.step_time_s`` (and phase times) for step ``i``;
        from then on ``log()`` without ``step=`` records at ``i`` too."""
        self.current_step = as_step(step)
        return self._timer.step(step)

    def phase(self, name: str) -> AbstractContextManager[None]:
        """``with run.phase("data"|"compute"|"comm"):`` adds to ``train.<name>_time_s``."""
        return self._timer.phase(name)

    def _log_timed(self, times: dict[str, float], step: int) -> None:
        if not self.finished:
            self.log(times, step=step)

    def event(self, kind: str, text: str = "", **data: Any) -> None:
        """Record an event (a checkpoint, a notable log line) carried with the next batch.

        Kinds of the collector's own records (``alert``, ``silence``, ``audit``...) are refused
        here, where the mistake is made: the collector would refuse the whole batch.
        """
        if not isinstance(kind, str) or not kind:
            raise TypeError("event kind must be a non-empty str")
        if kind in RECORD_KINDS:
            raise ValueError(f"event kind {kind!r} is reserved for the collector's own records")
        if not isinstance(text, str):
            raise TypeError(f"event text must be a str, got {type(text).__name__}")
        try:
            snapshot = json.loads(json.dumps(data, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"event data must be JSON numbers, strings, lists, dicts: {exc}"
            ) from None
        labels = dict(self.labels)
        self._pipeline.add_event(
            {"ts": self._wall(), "kind": kind, "text": text, "labels": labels, "data": snapshot}
        )

    def flush(self) -> None:
        """Block until everything logged so far is durable in the spool."""
        self._pipeline.flush()

    def finish(self, status: str = RunStatus.FINISHED, *, timeout_s: float = 10.0) -> None:
        """Flush, record how the run ended, and try for ``timeout_s`` to ship what is left.

        Whatever is not delivered stays in the spool for ``stepwatch sync``.
        """
        if status not in RunStatus.ALL or status == RunStatus.RUNNING:
            raise ValueError(f"status must be finished, failed or killed, got {status!r}")
        with self._finish_lock:
            if self.finished:
                return
            self.finished = True
        self._record = dataclasses.replace(self._record, status=status, end=self._wall())
        records_end = self._leader or status != RunStatus.FINISHED
        if records_end:
            write_run(self.spool_dir.parent, self._record, self._sealer)
        try:
            delivered = self._pipeline.close(timeout_s, self._record if records_end else None)
        finally:
            untrack(self)
        self._say_end(status, delivered)

    def _say_end(self, status: str, delivered: bool) -> None:
        """The run's last line: what was spooled, dropped and delivered; a warning when
        something was lost or is still waiting, so it shows without any logging set up."""
        lost, where = self.dropped_samples, self.spool_dir.parent
        said = f"run {self.id} {status}: {plural(self.durable_samples, 'sample')} spooled"
        if lost:
            said += f", {lost:,} dropped (the spool at {self.spool_dir} was full)"
        if delivered:
            said += ", all delivered"
        elif self.server is None and self._pipeline.sender is None:
            said += f"; offline: `stepwatch sync {where} --server URL` uploads it"
        else:
            said += f"; the rest waits in {where} for the next stepwatch process on this node"
        quiet = not lost and (delivered or self._pipeline.sender is None)
        log.log(logging.INFO if quiet else logging.WARNING, "stepwatch: %s", said)

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.finish(RunStatus.FAILED if exc_type is not None else RunStatus.FINISHED)

    def __repr__(self) -> str:
        state = "finished" if self.finished else "running"
        return f"<stepwatch.Run {self.id!r} source={self.source!r} {state}>"
