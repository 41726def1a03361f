"""The sender thread: ships a spool as records arrive, backing off while the collector is unwell."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from ..model import Run
from ._backoff import Backoff
from ._http import AuthError, TransportError
from ._ship import Shipper, ShipStats, create_run, finish_run
from ._spool import Spool
from ._transport import Transport

__all__ = ["Sender"]

log = logging.getLogger("stepwatch.spool")


class Sender:
    """Ships ``spool`` to the collector behind ``client`` from a daemon thread.

    Args:
        spool: the spool to drain; its acked position is where sending resumes.
        client: the collector connection (owned and closed by the sender).
        run: returns the run's metadata; the run is created on the server first
            (None for a producer outside any run, such as a standalone node agent).
        backoff: retry delays (default 0.1 s doubling to 10 s, with jitter).
        monotonic: clock for the shutdown deadline.
    """

    def __init__(
        self,
        spool: Spool,
        client: Transport,
        run: Callable[[], Run] | None,
        *,
        backoff: Backoff | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        name: str = "stepwatch-send",
    ) -> None:
        self._shipper = Shipper(spool, client)
        self._run = run
        self._backoff = backoff or Backoff()
        self._monotonic = monotonic
        self._wake = threading.Event()
        self._interrupt = threading.Event()
        self._closing = False
        self._deadline = math.inf
        self._finish: Run | None = None
        self._created = False
        self._delivered = False
        self._said: str | None = None  # why the last attempt failed, logged once a streak
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    @property
    def stats(self) -> ShipStats:
        """Counts of what the collector took so far."""
        return self._shipper.stats

    def start(self) -> None:
        """Begin shipping in the background."""
        self._thread.start()

    def notify(self) -> None:
        """Tell the sender that new records were written."""
        self._wake.set()

    def close(self, timeout_s: float, finish: Run | None = None) -> bool:
        """Ship what is left, then ``finish`` (the run's end), for at most ``timeout_s``.

        Returns True when everything was delivered; the rest stays in the spool.
        """
        self._finish = finish
        self._deadline = self._monotonic() + timeout_s
        self._closing = True
        self._wake.set()
        self._interrupt.set()
        if self._thread.is_alive():
            self._thread.join()
        self._shipper.client.close()
        return self._delivered

    def _expired(self) -> bool:
        return self._monotonic() >= self._deadline

    def _loop(self) -> None:
        while True:
            closing = self._closing
            try:
                self._round(closing)
            except TransportError as exc:
                if self._expired():
                    log.warning("stopped sending with batches left in the spool: %s", exc)
                    return
                delay = min(self._backoff.next(), self._deadline - self._monotonic())
                self._say_once(exc)
                log.debug("collector unavailable, retrying in %.2f s: %s", delay, exc)
                if self._interrupt.wait(delay):
                    self._interrupt.clear()
                continue
            self._backoff.reset()
            self._said = None
            if closing:
                return
            self._wake.wait()
            self._wake.clear()

    def _say_once(self, exc: TransportError) -> None:
        """Log why sending failed when the cause changes, not on every retry."""
        said = str(exc)
        if said != self._said:
            level = logging.ERROR if isinstance(exc, AuthError) else logging.WARNING
            log.log(level, "%s; the batches stay in the spool and are retried", said)
            self._said = said

    def _round(self, closing: bool) -> None:
        if not self._created and self._run is not None:
            create_run(self._shipper.client, self._run())
            self._created = True
        self._shipper.ship(stop=self._expired)
        if closing and not self._expired():
            if self._finish is not None:
                finish_run(self._shipper.client, self._finish)
            self._delivered = not self._shipper.spool.pending()
