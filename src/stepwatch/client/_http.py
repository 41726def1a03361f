"""How every front end talks to a collector: its address, the token, TLS, a timeout, a read
tried once more on a connection the collector dropped, JSON answers, list routes followed page
by page, and every failure one line for the person at the terminal that never holds the token."""

from __future__ import annotations

from contextlib import suppress
from typing import Any, Self

import httpx

from .._text import unreachable
from .._tls import ClientTls

__all__ = ["NEXT_CURSOR", "ApiSession", "ClientError"]

#: The header a list route sends the next page's cursor in (absent on the last page).
NEXT_CURSOR = "X-Next-Cursor"
#: Reads are sent once more when the connection was dropped under them: a kept-alive
#: connection the collector closed (its idle timeout, an error of its own, a restart) as the
#: request went out. A request that changes something is never sent twice, and a collector
#: that refuses connections or does not answer in time is not asked again.
_RETRIED = frozenset({"GET", "HEAD"})
_DROPPED = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
#: The most items a list route gives in one page.
MAX_PAGE = 10_000
#: Characters of an answer that is not the collector's JSON error (a proxy's page) shown.
_SHOWN = 200


class ClientError(RuntimeError):
    """The collector could not be reached, or refused the request: one line saying why.

    Args:
        message: what went wrong, and what to do about it.
        status: the HTTP status of the refusal; None when no answer came.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _one_line(text: str) -> str:
    """A body as one short line: its whitespace squeezed, cut after ``_SHOWN`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= _SHOWN else line[:_SHOWN] + "…"


def _message(response: httpx.Response) -> str:
    """The collector's own reason (``{"error": ...}``), else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return str(body["error"])
    return _one_line(response.text)


def _what(response: httpx.Response) -> str:
    """``GET /api/v1/alerts``: the request an error is about, without its query."""
    return f"{response.request.method} {response.request.url.path}"


class ApiSession:
    """Requests to one collector's ``/api/v1`` over a connection kept open between them.

    Args:
        url: the collector, e.g. ``http://127.0.0.1:7070``.
        token: sent as ``Authorization: Bearer TOKEN`` when given.
        timeout_s: how long one request may wait on the network.
        tls: the CA to trust and the client certificate, for an ``https://`` URL.
        transport: an httpx transport (tests and embedding); the network by default.
        page_size: items asked for in one request of a list route.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout_s: float = 30.0,
        tls: ClientTls | None = None,
        transport: httpx.BaseTransport | None = None,
        page_size: int = 1000,
    ) -> None:
        if not 1 <= page_size <= MAX_PAGE:
            raise ValueError(f"a page holds 1 to {MAX_PAGE:,} items, not {page_size}")
        self.url, self.page_size, self._has_token = url.rstrip("/"), page_size, bool(token)
        self._http = httpx.Client(
            base_url=self.url + "/api/v1",
            headers={"Authorization": f"Bearer {token}"} if token else {},
            timeout=timeout_s,
            verify=(tls or ClientTls()).verify(url),
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def response(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The collector's answer, whatever its status; a ClientError when none came."""
        try:
            return self._send(method, path, kwargs)
        except httpx.TransportError as exc:
            raise ClientError(unreachable(self.url, exc)) from None

    def _send(self, method: str, path: str, kwargs: dict[str, Any]) -> httpx.Response:
        """One request; a read that a dropped connection lost is sent again, once."""
        if method in _RETRIED:
            with suppress(*_DROPPED):
                return self._http.request(method, path, **kwargs)
        return self._http.request(method, path, **kwargs)

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON of a successful answer; a refusal is a ClientError with its reason."""
        return self.decode(self.response(method, path, **kwargs))

    def decode(self, response: httpx.Response) -> Any:
        """The JSON of ``response``; an error status, or a body that is not JSON, a
        ClientError."""
        if response.is_error:
            raise ClientError(self._refusal(response), response.status_code)
        try:
            return response.json()
        except ValueError:
            said = _one_line(response.text)
            raise ClientError(f"{_what(response)}: the answer is not JSON: {said}") from None

    def pages(self, path: str, params: dict[str, Any], limit: int | None = None) -> list[Any]:
        """Up to ``limit`` items of a list route (all of them with None), newest first as the
        route lists them, following the cursor of each page to the next."""
        items: list[Any] = []
        cursor: str | None = None
        while limit is None or len(items) < limit:
            size = self.page_size if limit is None else min(self.page_size, limit - len(items))
            query = {**params, "limit": size, **({"cursor": cursor} if cursor else {})}
            response = self.response("GET", path, params=query)
            page = self.decode(response)
            if not isinstance(page, list):
                raise ClientError(f"{_what(response)}: the answer is not a list")
            items.extend(page)
            cursor = response.headers.get(NEXT_CURSOR)
            if cursor is None or not page:
                break
        return items

    def _refusal(self, response: httpx.Response) -> str:
        """Why the collector said no, in one line; a missing token says how to give one."""
        status, message = response.status_code, _message(response)
        if status == 401 and not self._has_token:
            return (
                f"{self.url} needs a token (HTTP 401: {message}): pass --token or set "
                "STEPWATCH_TOKEN"
            )
        return f"{_what(response)}: HTTP {status}: {message}"
