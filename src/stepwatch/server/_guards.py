"""What a web page in the operator's browser must not do to the collector, checked before any
route runs: reach it under a foreign name (DNS rebinding), call it from another origin (CORS is
closed: no preflight passes, no ``Access-Control-Allow-*`` header leaves), or send a body larger
than a route needs (refused before it is read into memory)."""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import psutil
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._jsonio import error_response

__all__ = ["DEFAULT_MAX_JSON_BYTES", "LOOPBACK_NAMES", "Guards", "HostAllowList"]

#: Every JSON body but ingest's (which has its own, larger limit) is refused above this.
DEFAULT_MAX_JSON_BYTES = 1024 * 1024
#: Names that always reach a collector on this machine.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
#: Probes carry no data; a kubelet calls them by the pod's address, whatever the names.
_OPEN_PATHS = ("/healthz", "/readyz")
_BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def _hostname(netloc: str) -> str:
    """``[::1]:7070`` -> ``::1``, ``Example.org.:80`` -> ``example.org``."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        return netloc[1:].partition("]")[0]
    if netloc.count(":") == 1:
        netloc = netloc.partition(":")[0]
    return netloc.rstrip(".")


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return host == ""


def _this_machine() -> set[str]:
    """The host names and every interface address: how nodes reach a collector bound to all."""
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    for addresses in psutil.net_if_addrs().values():
        names |= {a.address.partition("%")[0].lower() for a in addresses if a.family in _INET}
    return names


_INET = (socket.AF_INET, socket.AF_INET6)


@dataclass(frozen=True, slots=True)
class HostAllowList:
    """The names the collector answers to; ``extra`` are the operator's own (``--allowed-host``),
    trusted as page origins too. ``*`` among them turns the check off."""

    names: frozenset[str]
    extra: frozenset[str] = frozenset()

    @classmethod
    def of(cls, bind: str, extra: Iterable[str] = ()) -> HostAllowList:
        """The bind address (every local address when it is 0.0.0.0 or ::), loopback, ``extra``."""
        extra = list(extra)
        if any(not _hostname(n) or "/" in n for n in extra):
            raise ValueError("an allowed host is a name or an address, like stepwatch.example.org")
        own = {_hostname(n) for n in extra}
        names = {*LOOPBACK_NAMES, *own}
        names |= _this_machine() if _is_wildcard(bind) else {_hostname(bind)}
        return cls(frozenset(names), frozenset(own))

    def allows(self, host: str) -> bool:
        return "*" in self.extra or _hostname(host) in self.names

    def same_origin(self, origin: str, host: str) -> bool:
        """Whether a page at ``origin`` may call a collector it reached as ``host``."""
        netloc = urlsplit(origin).netloc.lower()
        return netloc == host.lower() or "*" in self.extra or _hostname(netloc) in self.extra


def _refusal(hosts: HostAllowList, scope: Scope, headers: Headers) -> tuple[int, str] | None:
    """Why the request is refused before any route sees it, or None."""
    host = headers.get("host", "")
    if scope["path"] in _OPEN_PATHS:
        return None
    if not hosts.allows(host):
        return 421, (
            f"this collector does not answer to the host name {_hostname(host)!r}; "
            "if that is how you reach it, start it with --allowed-host NAME"
        )
    if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
        return 403, "cross-origin requests are not allowed: the API answers its own page only"
    origin = headers.get("origin")
    if origin is not None and not hosts.same_origin(origin, host):
        return 403, f"cross-origin request from {origin!r} refused: the API answers its own page"
    return None


class Guards:
    """ASGI middleware: the host and origin checks, the body limit, no CORS header out.

    Args:
        app: the application behind it.
        hosts: the names it answers to.
        max_json_bytes: the limit of every request body outside ``own_limits``.
        own_limits: patterns of the paths that read their body within their own limit
            (ingest, profile uploads), matched whole.
    """

    def __init__(
        self,
        app: ASGIApp,
        hosts: HostAllowList,
        max_json_bytes: int = DEFAULT_MAX_JSON_BYTES,
        own_limits: tuple[re.Pattern[str], ...] = (),
    ) -> None:
        self.app, self.hosts = app, hosts
        self.max_json_bytes, self.own_limits = max_json_bytes, own_limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refused = _refusal(self.hosts, scope, headers)
        if refused is None and scope["method"] in _BODY_METHODS:
            if not any(own.fullmatch(scope["path"]) for own in self.own_limits):
                refused, receive = await self._bounded_body(headers, receive)
        if refused is not None:
            await error_response(*refused)(scope, receive, send)
            return
        await self.app(scope, receive, _without_cors(send))

    async def _bounded_body(
        self, headers: Headers, receive: Receive
    ) -> tuple[tuple[int, str] | None, Receive]:
        """The body read up to the limit and handed on, or a 413 as soon as it is over."""
        limit = self.max_json_bytes
        declared = headers.get("content-length", "0")
        if not declared.isdigit():
            return (400, f"bad Content-Length header {declared!r}"), receive
        too_big = (413, f"body exceeds the {limit}-byte limit of this route")
        if int(declared) > limit:
            return too_big, receive
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return None, receive  # the client went away: the route finds out
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > limit:
                return too_big, receive
        return None, _replay(bytes(body), receive)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read already, then waits on the client as before."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


def _without_cors(send: Send) -> Send:
    """No answer may tell a browser that another origin can read it."""

    async def guarded(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [
                (k, v)
                for k, v in message.get("headers", [])
                if not k.lower().startswith(b"access-control-")
            ]
        await send(message)

    return guarded
