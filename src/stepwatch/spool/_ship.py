"""Shipping one spool to the collector: the response policy, separate from when to retry.

Keep the data: 200 acknowledges a record (``applied: false`` is a duplicate, also
delivered); a batch is given up only when the collector itself (its JSON error) says
that batch is malformed (400, 413, 415, 422), and even then it is moved to
``rejected/`` beside the spool's segments, never deleted, so one bad batch cannot block
the rest. Everything else (a wrong URL, a proxy's page, a refused token, 429, any 5xx)
is "later": the batch stays where it is and is retried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ..model import Run
from ..wire import RUNS_PATH
from ._http import AuthError, Response, TransportError
from ._meta import finish_payload, run_payload
from ._spool import Position, Spool
from ._transport import Transport

__all__ = [
    "BATCH_CONTENT_TYPE",
    "REJECTED_DIR",
    "ShipStats",
    "Shipper",
    "create_run",
    "finish_run",
]

BATCH_CONTENT_TYPE = "application/x-stepwatch-batch"
INGEST_PATH = "/api/v1/ingest"
#: Where batches the collector called malformed are kept (a spool of their own, never acked).
REJECTED_DIR = "rejected"
#: The statuses with which the collector blames the request body itself.
MALFORMED = frozenset({400, 413, 415, 422})
_HINTS = {
    404: "no such route: is the collector URL right?",
    405: "no such route: is the collector URL right?",
    429: "too many requests",
    502: "a proxy could not reach the collector",
    504: "a proxy timed out waiting for the collector",
}

log = logging.getLogger("stepwatch.spool")


@dataclass(slots=True)
class ShipStats:
    """What the collector took: batches delivered (new or duplicate), their samples, and the
    batches it called malformed (kept in ``rejected/``)."""

    batches: int = 0
    samples: int = 0
    rejected: int = 0


def _from_collector(response: Response) -> bool:
    """Whether the answer is the collector's own error (JSON), not a proxy's page."""
    return isinstance(response.body.get("error"), str)


def _later(response: Response, url: str) -> TransportError:
    """The error that keeps the data for a retry, saying why in words (never the token)."""
    status = response.status
    if status in (401, 403):
        return AuthError(
            f"the collector refused our token ({status}: {response.body.get('error')}): "
            "set STEPWATCH_TOKEN (or --token) to one it accepts"
        )
    hint = _HINTS.get(status, "try later")
    if not _from_collector(response):
        hint += "; the answer is not the collector's (a proxy?)"
    return TransportError(f"the collector at {url} answered {status} ({hint})")


def _refusal(response: Response, url: str) -> str | None:
    """None when taken; "400: why" when the collector calls the request malformed; for
    anything else raise TransportError, so the data is kept and retried."""
    if 200 <= response.status < 300:
        return None
    if response.status in MALFORMED and _from_collector(response):
        return f"{response.status}: {response.body['error']}"
    raise _later(response, url)


class Shipper:
    """Sends a spool's unacknowledged records in order and moves its acked position."""

    def __init__(self, spool: Spool, client: Transport, stats: ShipStats | None = None) -> None:
        self.spool = spool
        self.client = client
        self.stats = stats if stats is not None else ShipStats()

    def ship(self, stop: Callable[[], bool] = lambda: False) -> None:
        """Ship until nothing is pending or ``stop()``; raise TransportError to be retried later."""
        for position, payload in self.spool.records():
            response = self.client.post(INGEST_PATH, payload, BATCH_CONTENT_TYPE)
            refusal = _refusal(response, self.client.url)
            if refusal is None:
                self.stats.batches += 1
                self.stats.samples += int(response.body.get("samples", 0))
            else:
                self._set_aside(position, payload, refusal)
            self.spool.ack(position)
            if stop():
                return

    def _set_aside(self, position: Position, payload: bytes, refusal: str) -> None:
        """Keep a malformed batch in ``rejected/`` (durably, before it is acked) and count it."""
        with Spool(self.spool.path / REJECTED_DIR, sealer=self.spool.sealer) as rejected:
            rejected.append(payload)
        self.stats.rejected += 1
        log.error(
            "batch at %s:%d:%d rejected by the collector (%s); kept in %s (%d rejected so far)",
            self.spool.path.name,
            position.segment,
            position.offset,
            refusal,
            rejected.path,
            self.stats.rejected,
        )


def _post_record(client: Transport, path: str, body: dict[str, Any], what: str) -> None:
    """Post a run's record; one the collector calls malformed is logged, not fatal."""
    refusal = _refusal(client.post_json(path, body), client.url)
    if refusal is not None:
        log.error("%s rejected by the collector (%s)", what, refusal)


def create_run(client: Transport, run: Run, *, live: bool = True) -> None:
    """Create or update the run on the collector. A spool shipped after its writer is gone
    (not ``live``) says no status: its run file says "running" for a killed writer, and a run
    the collector knows has ended must not start running again (``finish_run`` says how it
    ended, when the run file knows)."""
    payload = run_payload(run)
    if not live:
        payload.pop("status", None)
    _post_record(client, RUNS_PATH, payload, f"run {run.id!r}")


def finish_run(client: Transport, run: Run) -> None:
    """Record how the run ended, if it has ended."""
    body = finish_payload(run)
    if body is not None:
        path = f"{RUNS_PATH}/{quote(run.id, safe='')}/finish"
        _post_record(client, path, body, f"finish of run {run.id!r}")
