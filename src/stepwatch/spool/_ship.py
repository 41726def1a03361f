"""Shipping one spool to the collector: the response policy, separate from when to retry.

200 acknowledges a record (``applied: false`` is a duplicate, also delivered);
408, 429 and 5xx mean "later"; 401 and 403 mean our token is wrong, which no
batch can be blamed for, so they are kept too; any other status is a permanent
rejection that is logged, counted and stepped over so one bad batch cannot
block the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from ..model import Run
from ._http import AuthError, HttpClient, Response, TransportError
from ._meta import finish_payload, run_payload
from ._spool import Spool

__all__ = ["BATCH_CONTENT_TYPE", "ShipStats", "Shipper", "create_run", "finish_run"]

BATCH_CONTENT_TYPE = "application/x-stepwatch-batch"
INGEST_PATH = "/api/v1/ingest"
RUNS_PATH = "/api/v1/runs"

log = logging.getLogger("stepwatch.spool")


@dataclass(slots=True)
class ShipStats:
    """What the collector took: batches delivered (new or duplicate), their samples, rejections."""

    batches: int = 0
    samples: int = 0
    rejected: int = 0


def _accepted(response: Response, what: str) -> bool:
    """True on success, False on a permanent rejection; raise TransportError for "try later"."""
    status = response.status
    if 200 <= status < 300:
        return True
    if status in (408, 429) or status >= 500:
        raise TransportError(f"{what}: the collector answered {status} (try later)")
    if status in (401, 403):
        raise AuthError(
            f"the collector refused our token ({status}: {response.body.get('error')}); "
            "the data stays in the spool: set STEPWATCH_TOKEN (or --token) to the collector's"
        )
    log.error("%s rejected by the collector (%d): %s", what, status, response.body.get("error"))
    return False


class Shipper:
    """Sends a spool's unacknowledged records in order and moves its acked position."""

    def __init__(self, spool: Spool, client: HttpClient, stats: ShipStats | None = None) -> None:
        self.spool = spool
        self.client = client
        self.stats = stats if stats is not None else ShipStats()

    def ship(self, stop: Callable[[], bool] = lambda: False) -> None:
        """Ship until nothing is pending or ``stop()``; raise TransportError to be retried later."""
        for position, payload in self.spool.records():
            response = self.client.post(INGEST_PATH, payload, BATCH_CONTENT_TYPE)
            what = f"batch at {self.spool.path.name}:{position.segment}:{position.offset}"
            if _accepted(response, what):
                self.stats.batches += 1
                self.stats.samples += int(response.body.get("samples", 0))
            else:
                self.stats.rejected += 1
            self.spool.ack(position)
            if stop():
                return


def create_run(client: HttpClient, run: Run) -> None:
    """Create or update the run on the collector (a rejection is logged, not fatal)."""
    _accepted(client.post_json(RUNS_PATH, run_payload(run)), f"run {run.id!r}")


def finish_run(client: HttpClient, run: Run) -> None:
    """Record how the run ended, if it has ended."""
    body = finish_payload(run)
    if body is not None:
        path = f"{RUNS_PATH}/{quote(run.id, safe='')}/finish"
        _accepted(client.post_json(path, body), f"finish of run {run.id!r}")
