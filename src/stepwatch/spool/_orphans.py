"""Orphaned spools come home by themselves: the next stepwatch process on a node ships them.

A spool is an orphan when it holds unsent records and nobody holds its lock: its writer is gone
(killed, or it ran out of time shipping at exit). Any producer that sends to a collector (an SDK
run, the node agent) starts one of these beside its own pipeline; it ships each orphan with the
steps of ``sync``, under the spool's lock, from a daemon thread, so neither the new run's start
nor its training thread waits for it, and two processes never ship one spool at once. An orphan
whose every batch (and its run's end) arrived is then deleted.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

from .._periodic import Periodic
from ._backoff import Backoff
from ._cleanup import sweep_run
from ._seal import Sealer, SpoolKeyError
from ._ship import ShipStats
from ._spool import has_unsent
from ._sync import Retrier, run_dirs, ship_run
from ._transport import Transport

__all__ = ["OrphanShipper"]

log = logging.getLogger("stepwatch.spool")


def _orphaned(run_dir: Path) -> bool:
    """Whether any spool of ``run_dir`` has unsent records (the lock is tried when shipping)."""
    try:
        return any(d.is_dir() and has_unsent(d) for d in run_dir.iterdir())
    except FileNotFoundError:
        return False


class OrphanShipper:
    """Ships the orphaned spools under ``root`` to the collector behind ``client``.

    Args:
        root: the spool root shared by the node's producers (``STEPWATCH_DIR``).
        client: the collector connection (owned and closed by this shipper).
        sealer: opens sealed spools; one it cannot open (or cannot write: another user's) is
            skipped and said once.
        rescan_s: look again this often (a long-lived agent); None: look once, at start.
        backoff: retry delays while the collector is unwell.
    """

    def __init__(
        self,
        root: Path,
        client: Transport,
        sealer: Sealer | None = None,
        *,
        rescan_s: float | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.root, self._client, self._sealer = root, client, sealer
        self.stats = ShipStats()
        self._worker = Periodic(
            self.ship_once,
            math.inf if rescan_s is None else rescan_s,  # once: then only the stop is waited for
            name="stepwatch-orphans",
            failed=f"stepwatch: shipping orphaned spools under {root} failed",
            log=log,
            at_start=True,
        )
        self._retry = Retrier(
            backoff or Backoff(cap_s=30.0),
            math.inf,
            time.monotonic,
            self._worker.pause,
            cancelled=lambda: self._worker.stopping,
        )
        self._skipped: set[Path] = set()  # sealed with a key this process lacks: said once

    def start(self) -> None:
        """Begin looking for orphans in the background."""
        self._worker.start()

    def close(self) -> None:
        """Stop after the batch in flight (the rest waits for the next process) and join."""
        self._worker.stop()
        self._client.close()

    def __enter__(self) -> OrphanShipper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ship_once(self) -> None:
        """Ship every orphan under the root now (until closed, or the token is refused)."""
        try:
            found = [d for d in run_dirs(self.root) if d not in self._skipped and _orphaned(d)]
        except FileNotFoundError:
            return
        for run_dir in found:
            if self._retry.expired():
                return
            before = self.stats.batches
            try:
                shipped = ship_run(run_dir, self._client, self.stats, self._retry, self._sealer)
            except (SpoolKeyError, OSError) as exc:  # not our key, not our files: said once
                self._skipped.add(run_dir)
                log.warning(
                    "stepwatch: %s; the orphaned spool in %s is left for `stepwatch sync`",
                    exc,
                    run_dir,
                )
                continue
            unsent, _, done = shipped
            if self.stats.batches > before:
                sent = self.stats.batches - before
                log.info("stepwatch: shipped %d batches a gone process left in %s", sent, run_dir)
            if done:
                sweep_run(run_dir)
            if unsent and self._retry.refused:
                log.error("stepwatch: orphaned spools stay unsent: %s", self._retry.refused)
