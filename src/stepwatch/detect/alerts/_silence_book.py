"""The silences a collector knows: created and expired by people, kept as records (folded into
the store's silence table) so that they outlive a restart, consulted by the live detector at
every alert transition (wall time)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...model import Event
from ._silences import Matcher, Silence

__all__ = ["SILENCE_EVENT", "SILENCE_EXPIRED_EVENT", "SilenceBook", "SilenceEntry"]

SILENCE_EVENT = "silence"
SILENCE_EXPIRED_EVENT = "silence_expired"

Record = Callable[[Sequence[Event]], None]


def _matcher_text(m: Matcher) -> str:
    return f"{m.label}{m.op}{m.value}"


@dataclass(frozen=True, slots=True)
class SilenceEntry:
    """A silence and, once a person ended it early, when."""

    silence: Silence
    expired_at: float | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SilenceEntry:
        """Back from the store's silence row: the silence's record data plus ``expired_at``."""
        at = row.get("expired_at")
        return cls(_from_data(row), None if at is None else float(at))

    def active(self, now: float) -> bool:
        return self.expired_at is None and self.silence.active(now)

    def as_json(self, now: float) -> dict[str, Any]:
        s = self.silence
        ends = s.ends if self.expired_at is None else min(s.ends, self.expired_at)
        return {
            "id": s.id,
            "matchers": [_matcher_text(m) for m in s.matchers],
            "starts": s.starts,
            "ends": ends,
            "created_by": s.created_by,
            "comment": s.comment,
            "active": self.active(now),
        }


def _event_data(s: Silence) -> dict[str, Any]:
    return {
        "id": s.id,
        "matchers": [_matcher_text(m) for m in s.matchers],
        "starts": s.starts,
        "ends": s.ends,
        "created_by": s.created_by,
        "comment": s.comment,
    }


def _from_data(d: Mapping[str, Any]) -> Silence:
    return Silence(
        tuple(Matcher.parse(text) for text in d["matchers"]),
        float(d["starts"]),
        float(d["ends"]),
        str(d.get("created_by", "")),
        str(d.get("comment", "")),
        str(d["id"]),
    )


class SilenceBook:
    """Thread-safe register of silences; every change is recorded before it takes effect.

    Args:
        record: writes events (the collector's store); changes reach it one at a time, in
            order, and take effect once recorded.
        clock: wall time, in which silences start and end.
        project_of: the project of a run: an alert's ``project`` label for matching, always
            its run's (never a label the data carried), empty for an alert of no run.
    """

    def __init__(
        self,
        record: Record = lambda events: None,
        clock: Callable[[], float] = time.time,
        project_of: Callable[[str | None], str | None] = lambda run: None,
    ) -> None:
        self._record, self._clock, self._project_of = record, clock, project_of
        self._changing = threading.Lock()  # held while a change is recorded: one at a time
        self._lock = threading.Lock()  # held briefly: readers never wait on a recording
        self._entries: dict[str, SilenceEntry] = {}

    def restore(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Take back the silences a previous life stored: their records' data plus
        ``expired_at`` (the store's silence rows)."""
        with self._lock:
            for row in rows:
                entry = SilenceEntry.from_row(row)
                self._entries[entry.silence.id] = entry

    def add(self, silence: Silence) -> SilenceEntry:
        """Record and apply a new silence."""
        with self._changing:
            if silence.id in self._entries:
                raise ValueError(f"a silence with id {silence.id!r} exists already")
            event = Event(self._clock(), SILENCE_EVENT, silence.comment, {}, _event_data(silence))
            self._record([event])
            with self._lock:
                entry = self._entries[silence.id] = SilenceEntry(silence)
            return entry

    def expire(self, silence_id: str, by: str = "") -> SilenceEntry:
        """End a silence now; KeyError when unknown. Expiring an ended silence changes nothing."""
        with self._changing:
            entry = self._entries[silence_id]
            now = self._clock()
            if entry.expired_at is not None or entry.silence.ends <= now:
                return entry
            data = {"id": silence_id, "by": by}
            self._record([Event(now, SILENCE_EXPIRED_EVENT, "", {}, data)])
            with self._lock:
                entry = self._entries[silence_id] = SilenceEntry(entry.silence, now)
            return entry

    def entries(self, include_ended: bool = False) -> list[SilenceEntry]:
        """Silences in force now (or all, ended ones too), oldest start first."""
        now = self._clock()
        with self._lock:
            chosen = [e for e in self._entries.values() if include_ended or e.silence.ends > now]
        chosen = [e for e in chosen if include_ended or e.expired_at is None]
        return sorted(chosen, key=lambda e: (e.silence.starts, e.silence.id))

    def mutes(self, labels: Mapping[str, str]) -> bool:
        """Whether a silence in force now matches these labels."""
        now = self._clock()
        with self._lock:
            entries = list(self._entries.values())
        if entries:
            labels = {**labels, "project": self._project_of(labels.get("run")) or ""}
        return any(e.active(now) and e.silence.mutes(labels, now) for e in entries)

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock
