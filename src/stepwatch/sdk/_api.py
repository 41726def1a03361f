"""Module-level ``init``/``log``/``finish``: the familiar one-run-per-script spelling."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._tls import ClientTls
from ..model import RunStatus
from ._run import Run

__all__ = ["current_run", "finish", "init", "log"]

_current: list[Run] = []  # the run that module-level log()/finish() act on; empty until init()


def init(
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
) -> Run:
    """Start logging a run and make it the current one.

    With ``STEPWATCH_ENCRYPTION_KEY_FILE`` (or the key in ``STEPWATCH_ENCRYPTION_KEY``) set,
    the spool is sealed with that key (see docs/security.md). With a server, spools under the
    spool root whose writer is gone (a killed trainer's) are shipped to it in the background,
    unless ``STEPWATCH_SHIP_ORPHANS=0``.

    Args:
        project: groups runs in the dashboard.
        name: a human name (the id stays the key).
        config: hyperparameters, stored with the run.
        server: collector URL; default env ``STEPWATCH_SERVER``, else offline (spool only).
        dir: spool root; default env ``STEPWATCH_DIR``, else ``~/.stepwatch/spool``.
        run_id: default env ``STEPWATCH_RUN_ID`` (shared by a launcher's ranks), else new.
        labels: series labels over those from ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``/host.
        flush_interval_s: how often the buffer is made durable and shipped.
        flush_samples: flush sooner once this many samples are buffered.
        max_spool_bytes: cap on the spool in bytes; past it new batches are dropped and counted
            (``run.dropped_samples``, the ``stepwatch.dropped_samples`` series, the run's
            summary). Default env ``STEPWATCH_MAX_SPOOL_BYTES`` (``512MiB``...), else the smaller
            of 2 GiB and 10 % of the spool file system's free space at start, split between the
            node's ranks (``LOCAL_WORLD_SIZE``); ``0``: no cap.
        token: bearer token for the collector; default env ``STEPWATCH_TOKEN``.
        planned_total_steps: lets the collector predict when the run ends.
        heartbeat_s: how often a liveness sample is sent even when nothing is logged.
        tls: for an ``https://`` server, the CA to trust and the client certificate of mutual
            TLS; default env ``STEPWATCH_CA_FILE``, ``STEPWATCH_CLIENT_CERT``,
            ``STEPWATCH_CLIENT_KEY``, else the system's CAs.
        transport: a RabbitMQ broker the batches go to instead of the server
            (``amqp://user:password@host:5672/vhost``; docs/scaling.md); default env
            ``STEPWATCH_TRANSPORT``. The server, when given, still carries training control.
    """
    run = Run(
        project=project,
        name=name,
        config=config,
        server=server,
        dir=dir,
        run_id=run_id,
        labels=labels,
        flush_interval_s=flush_interval_s,
        flush_samples=flush_samples,
        max_spool_bytes=max_spool_bytes,
        token=token,
        planned_total_steps=planned_total_steps,
        heartbeat_s=heartbeat_s,
        tls=tls,
        transport=transport,
    )
    _current[:] = [run]
    return run


def current_run() -> Run | None:
    """The run module-level ``log`` and ``finish`` act on, if any."""
    return _current[0] if _current else None


def log(
    data: Mapping[str, object], step: int | None = None, labels: Mapping[str, object] | None = None
) -> None:
    """``run.log`` on the current run."""
    run = current_run()
    if run is None:
        raise RuntimeError("no current run: call stepwatch.init() first")
    run.log(data, step=step, labels=labels)


def finish(status: str = RunStatus.FINISHED) -> None:
    """Finish the current run (no-op when there is none)."""
    run = current_run()
    if run is not None:
        _current.clear()
        run.finish(status)
