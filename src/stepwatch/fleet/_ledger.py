"""What collectors tell each other durably (the tokens they made or revoked): signed records on
one small stream that every collector reads from its start, so a collector that joins late
learns everything, and one without the fleet key can neither read it as true nor write it."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from ._key import FleetKey

__all__ = ["LEDGER_STREAM", "Ledger"]

log = logging.getLogger("stepwatch.fleet")

LEDGER_STREAM = "stepwatch.fleet.ledger"
#: The ledger's bound on the broker: records are a few hundred bytes.
LEDGER_BYTES = 64 << 20

#: Told each record the fleet key vouches for: its kind and document.
OnRecord = Callable[[str, dict[str, Any]], None]


class Ledger:
    """Records to publish (any thread) and the handler of those read (the fleet thread)."""

    def __init__(self, key: FleetKey, member: str, on_record: OnRecord) -> None:
        self._key, self._member, self._on_record = key, member, on_record
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self.forged = 0  # records whose signature did not hold

    def tell(self, kind: str, doc: dict[str, Any]) -> None:
        """Queue a record; the fleet thread publishes it (again after a broker outage)."""
        body = json.dumps(doc, sort_keys=True, separators=(",", ":"))
        record = {"kind": kind, "from": self._member, "doc": body}
        record["sig"] = self._key.sign(kind, body)
        with self._lock:
            self._pending.append(json.dumps(record).encode())

    def publish(self, channel: Any) -> None:
        """Publish what waits on ``channel`` (in confirm mode); kept on failure."""
        with self._lock:
            pending, self._pending = self._pending, []
        try:
            while pending:
                channel.basic_publish("", LEDGER_STREAM, pending[0], mandatory=True)
                pending.pop(0)
        finally:
            if pending:
                with self._lock:
                    self._pending[:0] = pending

    def read(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        """A record read from the stream: handled when the fleet key vouches for it."""
        channel.basic_ack(method.delivery_tag)
        try:
            record = json.loads(body)
            kind, doc, sig = record["kind"], record["doc"], record["sig"]
            trusted = self._key.verify(str(sig), str(kind), str(doc))
        except (ValueError, KeyError, TypeError):
            trusted = False
        if not trusted:
            self.forged += 1
            log.warning("a fleet record without a valid signature was ignored")
            return
        try:
            self._on_record(kind, json.loads(doc))
        except Exception:
            log.exception("a fleet record of kind %r could not be applied", kind)
