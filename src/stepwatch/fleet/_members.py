"""Who is in the fleet: collectors announce themselves on a fanout exchange every half second.

A member unheard for ``DEAD_AFTER_S`` is gone, and its partitions go to the others. A killed
collector's locks vanish with its connection at once; the silence only says who takes over.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["BEAT_S", "DEAD_AFTER_S", "Member", "Members"]

BEAT_S = 0.5
DEAD_AFTER_S = 3.0


@dataclass(frozen=True, slots=True)
class Member:
    """A collector of the fleet: its id, the URL its API answers on, the partitions it reads."""

    id: str
    url: str
    partitions: tuple[int, ...] = ()

    def encode(self) -> bytes:
        return json.dumps({"id": self.id, "url": self.url, "partitions": self.partitions}).encode()

    @classmethod
    def decode(cls, body: bytes) -> Member:
        """A heartbeat's member; ValueError for anything else on the exchange."""
        try:
            doc = json.loads(body)
            parts = tuple(int(p) for p in doc.get("partitions", ()))
            member = cls(str(doc["id"]), str(doc["url"]), parts)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a fleet heartbeat: {exc}") from None
        return member


class Members:
    """The members heard lately, with this collector always among them."""

    def __init__(self, me: Member, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.me, self._monotonic = me, monotonic
        self._lock = threading.Lock()
        self._heard: dict[str, tuple[Member, float]] = {}

    def heard(self, member: Member) -> None:
        with self._lock:
            self._heard[member.id] = (member, self._monotonic())

    def alive(self) -> dict[str, Member]:
        """Members heard within ``DEAD_AFTER_S``, by id (this one as it is now)."""
        now = self._monotonic()
        with self._lock:
            live = {k: m for k, (m, t) in self._heard.items() if now - t < DEAD_AFTER_S}
        live[self.me.id] = self.me
        return live
