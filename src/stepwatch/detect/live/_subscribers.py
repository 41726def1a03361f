"""Who hears of alert transitions: callbacks added and removed from any thread, told in order
on the detector thread; one that fails is logged and the others are still told."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from ._live_alert import LiveAlert

__all__ = ["Subscriber", "Subscribers"]

log = logging.getLogger("stepwatch.detect")

Subscriber = Callable[[LiveAlert], None]


class Subscribers:
    """The callbacks of the live detector, each with whether it wants muted alerts too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[tuple[Subscriber, bool]] = []

    def add(self, callback: Subscriber, *, muted: bool = False) -> Callable[[], None]:
        """Tell ``callback`` each transition that is not silenced or inhibited, or every one
        when ``muted``; returns the unsubscribe."""
        entry = (callback, muted)
        with self._lock:
            self._entries.append(entry)

        def unsubscribe() -> None:
            with self._lock:
                if entry in self._entries:
                    self._entries.remove(entry)

        return unsubscribe

    def tell(self, alerts: Sequence[LiveAlert]) -> None:
        with self._lock:
            entries = list(self._entries)
        for alert in alerts:
            for callback, wants_muted in entries:
                if wants_muted or not alert.muted:
                    try:
                        callback(alert)
                    except Exception:
                        log.exception("an alert subscriber failed")
