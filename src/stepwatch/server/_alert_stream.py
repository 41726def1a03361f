"""Alert transitions pushed to server-sent-event subscribers as the live detector makes them.

The detector thread publishes into a subscriber hub (see ``_sse``). A subscriber
too slow to keep up is ended once what it holds is sent (its client reconnects
and lists the alerts) rather than buffered without bound.
"""

from __future__ import annotations

import json

from ..detect import LiveAlert
from ._jsonio import clean
from ._sse import HEARTBEAT_S, Subscriber, SubscriberHub

__all__ = ["AlertStreams", "alert_json"]

#: Transitions a subscriber may have waiting before it is cut off.
MAX_WAITING = 1000


def alert_json(alert: LiveAlert, acked: bool = False) -> dict[str, object]:
    """The API's shape of an alert (non-finite numbers spelled as strings)."""
    return clean({**alert.as_json(), "acked": acked})  # type: ignore[no-any-return]


class AlertStreams(SubscriberHub[list[str]]):
    """Subscribers, optionally of one run; ``publish`` is a live-detector subscriber.

    ``events(run)`` is the text of one stream: ``event: alert`` per transition.
    """

    def __init__(self, heartbeat_s: float = HEARTBEAT_S) -> None:
        super().__init__(list, "".join, heartbeat_s)

    def publish(self, alert: LiveAlert) -> None:
        """Send one transition to the subscribers of its run."""
        if not self:
            return
        run = alert.labels.get("run")
        text = f"event: alert\ndata: {json.dumps(alert_json(alert))}\n\n"

        def fold(sub: Subscriber[list[str]]) -> bool:
            if sub.closed or not sub.wants(run):
                return False
            if len(sub.pending) >= MAX_WAITING:  # too slow: end it rather than buffer without bound
                sub.closed = True
            else:
                sub.pending.append(text)
            return True

        self.deliver(fold)
