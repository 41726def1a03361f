"""Where a spool ships to, by its URL: a collector over HTTP(S) or a broker over AMQP."""

from __future__ import annotations

from typing import Any, Protocol

from .._tls import ClientTls
from ..wire import is_broker_url
from ._http import Connect, HttpClient, Response

__all__ = ["Transport", "open_transport"]


class Transport(Protocol):
    """What shipping needs of a connection: post a body, post a document, close."""

    url: str

    def post(self, path: str, body: bytes, content_type: str) -> Response: ...

    def post_json(self, path: str, doc: dict[str, Any]) -> Response: ...

    def close(self) -> None: ...


def open_transport(
    url: str, token: str | None, *, tls: ClientTls | None = None, connect: Connect | None = None
) -> Transport:
    """An ``amqp://`` or ``amqps://`` URL publishes to a broker; anything else is a collector."""
    if is_broker_url(url):
        from ._broker import BrokerClient  # pika is imported by those who use a broker

        return BrokerClient(url, token)
    return HttpClient(url, token, tls=tls, connect=connect)
