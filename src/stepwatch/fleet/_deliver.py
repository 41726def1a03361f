"""Handing a message from the broker to this collector: the HTTP request it stands for, sent to
the collector's own API with the producer's token, so a batch from the broker passes every
check a batch over HTTP does (token, role, project, source owner, malformed bodies)."""

from __future__ import annotations

import logging
import threading
from collections import Counter

from .._tls import ClientTls
from ..spool import HttpClient, TransportError
from ._partition import Outcome

__all__ = ["LocalCollector"]

log = logging.getLogger("stepwatch.fleet")

#: Answers of a collector that cannot take the message yet (any 5xx too): tried again.
_RETRIED = frozenset({408, 425, 429})


class LocalCollector:
    """Delivers messages to the collector at ``url`` (one connection per reading thread) and
    counts the refusals by status."""

    def __init__(self, url: str, tls: ClientTls | None = None) -> None:
        self.url, self._tls = url, tls
        self._local = threading.local()
        self.refused: Counter[int] = Counter()

    def _client(self) -> HttpClient:
        client: HttpClient | None = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = HttpClient(self.url, None, tls=self._tls)
        return client

    def __call__(self, path: str, body: bytes, content_type: str, token: str | None) -> Outcome:
        headers = {"Content-Type": content_type}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            response = self._client().request("POST", path, body, headers)
        except TransportError:
            return Outcome.LATER
        status = response.status
        if 200 <= status < 300:
            return Outcome.TAKEN
        if status >= 500 or status in _RETRIED:
            return Outcome.LATER
        self.refused[status] += 1
        log.warning(
            "a message from the broker for %s was refused (%d: %s); it is dropped",
            path,
            status,
            response.body.get("error", "no reason given"),
        )
        return Outcome.REFUSED
