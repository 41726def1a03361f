"""The notifier as a checkpoint: its groups (what each receiver was told and when), the
transitions not yet filed and the messages not yet delivered; and how the delivery records
since the checkpoint bring that up to date, so nothing sent after it is sent again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..detect import AlertGroup, LiveAlert
from ._audit import AuditRecord
from ._incident_playbook import IncidentPlaybook
from ._notify_dispatch import Dispatch, Times
from ._notify_message import IncidentNote, Notification
from ._state import alert_of, decode, encode, malformed

__all__ = ["PART", "Saved", "catch_up"]

FORMAT = 1
PART = "notify"


def _note(note: IncidentNote | None) -> dict[str, Any] | None:
    if note is None:
        return None
    return {
        "id": note.id, "cause": note.cause.as_json(), "evidence": list(note.evidence),
        "size": note.size, "playbooks": [p.as_json() for p in note.playbooks],
    }  # fmt: skip


def _note_of(data: dict[str, Any] | None) -> IncidentNote | None:
    if data is None:
        return None
    cause, size = alert_of(data["cause"]), int(data["size"])
    evidence = tuple(str(e) for e in data["evidence"])
    playbooks = tuple(IncidentPlaybook.of_json(p) for p in data["playbooks"])
    return IncidentNote(str(data["id"]), cause, evidence, size, playbooks)


def _message(n: Notification) -> dict[str, Any]:
    return {
        "receiver": n.receiver, "key": n.key, "labels": n.group.labels,
        "alerts": [a.as_json() for a in n.alerts], "external_url": n.external_url,
        "incident": _note(n.incident),
    }  # fmt: skip


def _message_of(data: dict[str, Any]) -> Notification:
    group = AlertGroup(dict(data["labels"]), tuple(map(alert_of, data["alerts"])))
    note = _note_of(data.get("incident"))  # none in a checkpoint of an older version
    receiver, key, url = str(data["receiver"]), str(data["key"]), str(data["external_url"])
    return Notification(receiver, key, group, url, note)


def _sent(receiver: str, key: str, alert_ids: Sequence[str]) -> tuple[str, str, tuple[str, ...]]:
    """What tells one delivery from another: its receiver, its group, its alerts."""
    return (receiver, key, tuple(alert_ids))


@dataclass
class Saved:
    """A notifier's checkpoint: when it was taken, the dispatch's state (times in wall time),
    the transitions waiting to be filed and the messages waiting to be delivered."""

    taken: float
    dispatch: dict[str, Any]
    inbox: list[LiveAlert]
    unsent: list[Notification]

    def encode(self) -> bytes:
        body = {"taken": self.taken, "dispatch": self.dispatch}
        inbox = [a.as_json() for a in self.inbox]
        return encode(FORMAT, body | {"inbox": inbox, "unsent": list(map(_message, self.unsent))})

    @classmethod
    def decode(cls, state: bytes) -> Saved:
        """ValueError for a checkpoint this version cannot read."""
        data = decode(state, FORMAT, PART)
        with malformed(PART):
            inbox = [alert_of(a) for a in data["inbox"]]
            unsent = [_message_of(n) for n in data["unsent"]]
            return cls(float(data["taken"]), dict(data["dispatch"]), inbox, unsent)


def catch_up(
    dispatch: Dispatch,
    unsent: Sequence[Notification],
    records: Sequence[tuple[float, AuditRecord]],
    back: Times,
) -> list[Notification]:
    """Apply the deliveries recorded since the checkpoint (oldest first) to ``dispatch``
    (their wall times back through ``back``); the messages of ``unsent`` none of them was."""
    delivered: Counter[tuple[str, str, tuple[str, ...]]] = Counter()
    for ts, record in records:
        d = record.detail
        key, ids = d.get("group"), d.get("alerts")
        if not isinstance(key, str) or not isinstance(ids, list):
            continue  # not a delivery of a group (a record of another shape)
        ended = [str(i) for i in d.get("resolved") or []]
        dispatch.sent(key, [str(i) for i in ids if i not in ended], ended, back(ts))
        delivered[_sent(record.actor, key, [str(i) for i in ids])] += 1
    left: list[Notification] = []
    for n in unsent:
        sent = _sent(n.receiver, n.key, [a.id for a in n.alerts])
        if delivered[sent] > 0:
            delivered[sent] -= 1
        else:
            left.append(n)
    return left
