"""A small keep-alive HTTP client for the collector API (``http.client``: stdlib only)."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .._tls import ClientTls, tls_hint

__all__ = ["AuthError", "Connect", "HttpClient", "Response", "TransportError"]

#: Builds a connection from (scheme, host, port, timeout): the seam tests and proxies plug into.
Connect = Callable[[str, str, int, float], http.client.HTTPConnection]


class TransportError(Exception):
    """The collector cannot take the request now (unreachable, connection broke, 408/429/5xx)."""


class AuthError(TransportError):
    """The collector refused our credentials (401/403): keep the data until the token is fixed."""


@dataclass(frozen=True, slots=True)
class Response:
    """A status code and the decoded JSON body (empty when the body was not JSON)."""

    status: int
    body: dict[str, Any]

    @property
    def retryable(self) -> bool:
        """A 5xx, 408 or 429: the collector may take the same request later, so keep it."""
        return self.status >= 500 or self.status in (408, 429)


def _connector(context: ssl.SSLContext | None) -> Connect:
    """The default ``Connect``: ``http.client``, with ``context`` for https."""

    def connect(scheme: str, host: str, port: int, timeout: float) -> http.client.HTTPConnection:
        if scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
        return http.client.HTTPConnection(host, port, timeout=timeout)

    return connect


def _decode(raw: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {"value": doc}


class HttpClient:
    """Requests to one collector over a connection kept open between requests.

    Args:
        url: the collector's base URL, e.g. ``http://127.0.0.1:7070``.
        token: sent as ``Authorization: Bearer <token>`` when given.
        timeout_s: socket timeout of each request.
        tls: the CA to trust and the client certificate, for an ``https://`` URL (its files
            are loaded now: a bad one is a ValueError).
        connect: connection factory (default: ``http.client``).
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout_s: float = 5.0,
        tls: ClientTls | None = None,
        connect: Connect | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"collector URL must look like http://host:port, got {url!r}")
        self.url = url
        self._scheme, self._host = parts.scheme, parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._prefix = parts.path.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = timeout_s
        self._connect = connect or _connector((tls or ClientTls()).context_for(url))
        self._conn: http.client.HTTPConnection | None = None

    def post(self, path: str, body: bytes, content_type: str) -> Response:
        """Send one request; raise TransportError when no answer came back."""
        return self.request("POST", path, body, {"Content-Type": content_type})

    def get(self, path: str) -> Response:
        """Read one resource (``path`` with its query string); TransportError as ``post``."""
        return self.request("GET", path, None, {})

    def request(
        self, method: str, path: str, body: bytes | None, extra: dict[str, str]
    ) -> Response:
        """Send one request with ``extra`` headers (over the client's own; TransportError as
        ``post``)."""
        headers = {**self._headers, **extra}
        try:
            if self._conn is None:
                self._conn = self._connect(self._scheme, self._host, self._port, self._timeout)
            self._conn.request(method, self._prefix + path, body=body, headers=headers)
            reply = self._conn.getresponse()
            raw = reply.read()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            hint = tls_hint(exc, self.url)
            said = f"{self.url}: {type(exc).__name__}: {exc}" + (f" ({hint})" if hint else "")
            raise TransportError(said) from exc
        if reply.will_close:
            self.close()
        return Response(reply.status, _decode(raw))

    def post_json(self, path: str, doc: dict[str, Any]) -> Response:
        """Send a JSON document."""
        return self.post(path, json.dumps(doc, default=str).encode(), "application/json")

    def close(self) -> None:
        """Drop the kept-open connection (the next request opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
