"""Shipping to a RabbitMQ broker instead of a collector: the spool's other transport.

A record leaves the spool only once the broker confirmed it (publisher confirms on a durable
stream), so the spool stays what makes delivery durable. Until a collector has declared the
partitions, publishing is an error and the records wait.
"""

from __future__ import annotations

import json
from typing import Any

import pika
import pika.exceptions

from .._redact import redact_url
from ..wire import (
    HEADER_PATH,
    HEADER_SOURCE,
    HEADER_TOKEN,
    WireError,
    partition_of,
    partition_stream,
    routing_key,
)
from ._http import Response, TransportError

__all__ = ["BrokerClient"]

#: More partitions than any fleet declares: counting stops here.
MAX_PARTITIONS = 4096


class BrokerClient:
    """Publishes what ``HttpClient`` would post, keyed by run, with the broker's confirmation.

    Args:
        url: the broker, ``amqp://user:password@host:5672/vhost`` (``amqps://`` for TLS).
        token: the producer's collector token, carried in each message: the collector that
            consumes it checks it as HTTP ingest would.
        timeout_s: how long to wait for the connection and each confirmation.
    """

    def __init__(self, url: str, token: str | None = None, *, timeout_s: float = 5.0) -> None:
        try:
            self._params = pika.URLParameters(url)
        except Exception as exc:
            raise ValueError(f"bad broker URL {redact_url(url)}: {exc}") from None
        self._params.socket_timeout = self._params.blocked_connection_timeout = timeout_s
        self._params.stack_timeout = timeout_s
        self.url = redact_url(url)  # what errors say: never the password
        self._token = token
        self._conn: Any = None
        self._channel: Any = None
        self._partitions = 0  # counted on each new connection

    def post(self, path: str, body: bytes, content_type: str) -> Response:
        """Publish one request's body; answer 200 once the broker confirmed it, 400 when the
        body cannot be keyed (malformed), raise TransportError when the broker did not take it."""
        try:
            route = routing_key(path, body, content_type)
        except (WireError, ValueError, KeyError, TypeError) as exc:
            return Response(400, {"error": f"cannot route this message by run: {exc}"})
        headers = {HEADER_PATH: path}
        if self._token:
            headers[HEADER_TOKEN] = self._token
        if route.source is not None:
            headers[HEADER_SOURCE] = route.source
        props = pika.BasicProperties(content_type=content_type, delivery_mode=2, headers=headers)
        try:
            channel = self._open()
            stream = partition_stream(partition_of(route.key, self._partitions))
            channel.basic_publish("", stream, body, props, mandatory=True)
        except pika.exceptions.UnroutableError:
            self.close()  # the partitions changed under us: count them again
            raise TransportError(f"the broker at {self.url} has no stream {stream}") from None
        except pika.exceptions.ChannelClosedByBroker as exc:
            self._channel = None
            raise TransportError(f"the broker at {self.url} refused: {exc.reply_text}") from None
        except (pika.exceptions.AMQPError, OSError) as exc:
            self.close()
            raise TransportError(f"{self.url}: {type(exc).__name__}: {exc}") from None
        return Response(200, {"samples": route.samples, "routed": route.key})

    def post_json(self, path: str, doc: dict[str, Any]) -> Response:
        """Publish a JSON document (a run's record or end)."""
        return self.post(path, json.dumps(doc, default=str).encode(), "application/json")

    def get(self, path: str) -> Response:
        """A broker answers no questions: reading goes to a collector."""
        raise TransportError(f"{self.url} is a broker: GET {path} needs a collector URL")

    def _open(self) -> Any:
        if self._conn is None or not self._conn.is_open:
            conn = pika.BlockingConnection(self._params)
            try:
                self._partitions = self._count_partitions(conn)
            except BaseException:
                conn.close()
                raise
            self._conn, self._channel = conn, None
        if self._channel is None or not self._channel.is_open:
            self._channel = self._conn.channel()
            self._channel.confirm_delivery()
        return self._channel

    def _count_partitions(self, conn: Any) -> int:
        """The streams the collectors declared (the first is declared last: once it is there,
        all are). Each missing one closes the channel it was asked on."""
        count = 0
        while count < MAX_PARTITIONS:
            channel = conn.channel()
            try:
                channel.queue_declare(partition_stream(count), passive=True)
            except pika.exceptions.ChannelClosedByBroker:
                break
            channel.close()
            count += 1
        if count == 0:
            raise TransportError(
                f"the broker at {self.url} has no stepwatch partitions yet "
                "(no collector has declared them): try later"
            )
        return count

    def close(self) -> None:
        """Drop the connection (the next publish opens a new one)."""
        conn, self._conn, self._channel = self._conn, None, None
        if conn is not None and conn.is_open:
            try:
                conn.close()
            except (pika.exceptions.AMQPError, OSError):
                pass
