"""``sync``: upload spools written offline or left behind by a killed process.

The same steps ship orphaned spools in the background (``_orphans``): one way to send a spool.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from .._text import plural
from .._tls import ClientTls, tls_hint
from ._backoff import Backoff
from ._http import AuthError, Connect, TransportError
from ._lock import SpoolLock
from ._meta import NODE_SPOOL, RUN_FILE, read_run
from ._seal import Sealer
from ._ship import Shipper, ShipStats, create_run, finish_run
from ._spool import Spool, has_unsent
from ._transport import Transport, open_transport

__all__ = ["Retrier", "SyncResult", "run_dirs", "ship_run", "sync"]


@dataclass(frozen=True, slots=True)
class SyncResult:
    """Runs seen; batches and samples the collector took; batches it rejected or never got."""

    runs: int = 0
    batches: int = 0
    samples: int = 0
    rejected: int = 0
    unsent: int = 0
    #: Spools left alone because another process holds them (a live writer, another shipper).
    busy: int = 0
    #: Why sending stopped with batches left (the collector refused the token, or could not be
    #: reached in time), else None.
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Everything was sent and taken."""
        return not (self.rejected or self.unsent or self.error)

    def describe(self) -> str:
        """What was sent and, when something was left, why it stopped: what `sync` prints."""
        if not self.runs:
            return "found no runs to send"
        batches = lambda n: plural(n, "batch", "batches")  # noqa: E731
        said = f"sent {batches(self.batches)} ({plural(self.samples, 'sample')}) of "
        said += plural(self.runs, "run")
        if self.rejected:
            said += f"; {batches(self.rejected)} rejected by the collector, kept in rejected/"
        if self.busy:
            said += f"; {plural(self.busy, 'spool')} in use by a running process left alone"
        if self.unsent:
            return f"{said}; {batches(self.unsent)} left: {self.error or 'not sent'}"
        if self.error:
            return f"{said}; {self.error}"
        return said if self.rejected else f"{said}; nothing left to send"


@dataclass(slots=True)
class Retrier:
    """Retries a call on TransportError with backoff until a shared deadline.

    A refused token ends every retry at once: waiting will not fix it. ``failure`` is the last
    error not followed by a success: why sending stopped.
    """

    backoff: Backoff
    deadline: float
    monotonic: Callable[[], float]
    sleep: Callable[[float], object]
    #: Ends every retry at once when it turns true (the process shipping is closing).
    cancelled: Callable[[], bool] = lambda: False
    refused: str | None = None
    failure: TransportError | None = None

    def expired(self) -> bool:
        return self.refused is not None or self.cancelled() or self.monotonic() >= self.deadline

    def __call__(self, fn: Callable[[], None]) -> bool:
        while not self.expired():
            try:
                fn()
            except AuthError as exc:
                self.refused = str(exc)
                return False
            except TransportError as exc:
                self.failure = exc
                delay = self.backoff.next()
                if self.monotonic() + delay >= self.deadline:
                    return False
                self.sleep(delay)
                continue
            self.backoff.reset()
            self.failure = None
            return True
        return False


def _why_stopped(server: str, retry: Retrier, elapsed_s: float) -> str:
    """Why batches were left, in words: "server URL unreachable (connection refused) after
    60 s"."""
    if retry.refused is not None:
        return retry.refused
    after = f"after {elapsed_s:.1f} s" if elapsed_s < 10 else f"after {elapsed_s:.0f} s"
    cause = retry.failure.__cause__ if retry.failure is not None else None
    if isinstance(cause, OSError):  # nothing answered: refused, timed out, unknown host...
        reason = (cause.strerror or str(cause) or type(cause).__name__).lower()
        hint = tls_hint(cause, server)
        if hint is not None:
            return f"cannot talk to server {server} {after}: {hint} ({reason})"
        return f"server {server} unreachable ({reason}) {after}"
    if retry.failure is not None:  # it answered, but "try later" every time
        return f"still failing {after}: {retry.failure}"
    return f"out of time {after}"


def _is_run_dir(path: Path) -> bool:
    return (path / RUN_FILE).is_file() or (path.name == NODE_SPOOL and path.is_dir())


def run_dirs(root: Path) -> list[Path]:
    """``root`` when it is one run's directory, else the run directories in it."""
    if _is_run_dir(root):
        return [root]
    if not root.is_dir():
        raise FileNotFoundError(f"no spool directory at {root}")
    return [d for d in sorted(root.iterdir()) if _is_run_dir(d)]


def _claim(run_dir: Path, sealer: Sealer | None, stack: ExitStack) -> tuple[list[Spool], int]:
    """Lock and open the spools of ``run_dir`` with something unsent; count those another
    process holds (a live writer or another shipper), which are left alone."""
    spools, busy = [], 0
    for source_dir in sorted(d for d in run_dir.iterdir() if d.is_dir() and has_unsent(d)):
        lock = SpoolLock.take(source_dir)
        if lock is None:
            busy += 1
            continue
        stack.enter_context(lock)
        spools.append(stack.enter_context(Spool(source_dir, sealer=sealer)))
    return spools, busy


def ship_run(
    run_dir: Path, client: Transport, stats: ShipStats, retry: Retrier, sealer: Sealer | None
) -> tuple[int, int, bool]:
    """Create the run, ship each of its sources, record its end; return the batches left unsent,
    the spools left alone because another process holds them, and whether all of it (the end
    included) reached the collector.

    The node spool (producers outside any run) has no run to create or finish. Every spool is
    opened first, so a missing or wrong key is said before anything of the run is sent.
    """
    run = read_run(run_dir, sealer) if run_dir.name != NODE_SPOOL else None
    with ExitStack() as stack:
        spools, busy = _claim(run_dir, sealer, stack)
        if busy and not spools:  # its writers are alive: they ship it themselves
            return 0, busy, False
        created = run is None or retry(partial(create_run, client, run, live=False))
        unsent = 0
        for spool in spools:
            if created:
                retry(partial(Shipper(spool, client, stats).ship, stop=retry.expired))
            unsent += sum(1 for _ in spool.records())
    done = created and not unsent and not busy
    if run is not None and done:
        done = retry(partial(finish_run, client, run))
    return unsent, busy, done


def sync(
    path: str | os.PathLike[str],
    server: str,
    token: str | None = None,
    *,
    timeout_s: float = 60.0,
    tls: ClientTls | None = None,
    connect: Connect | None = None,
    backoff: Backoff | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    sealer: Sealer | None = None,
) -> SyncResult:
    """Upload every run under a spool directory (or one run directory) to ``server``.

    Safe to repeat: each source resumes from its acked position and the
    collector drops batches it already has. Gives up retrying after ``timeout_s``. A spool
    another process holds (its writer still running, or another shipper) is left alone.
    ``sealer`` opens spools written with an encryption key (SpoolKeyError without it); ``tls``
    says how to trust an ``https://`` server (and the client certificate for mutual TLS).
    """
    dirs = run_dirs(Path(path))
    client = open_transport(server, token, tls=tls, connect=connect)
    stats = ShipStats()
    started = monotonic()
    retry = Retrier(backoff or Backoff(), started + timeout_s, monotonic, sleep)
    unsent = busy = 0
    try:
        for run_dir in dirs:
            left, held, _ = ship_run(run_dir, client, stats, retry, sealer)
            unsent, busy = unsent + left, busy + held
    finally:
        client.close()
    why = _why_stopped(server, retry, monotonic() - started) if unsent else retry.refused
    return SyncResult(
        len(dirs), stats.batches, stats.samples, stats.rejected, unsent, busy, error=why
    )
