"""The durable spool: append-only segment files of framed records plus a persisted acked position.

Why this shape: appending whole records and fsync'ing them makes every batch
durable before the network is involved; a reader resumes from the acked
position after any restart, and fully acknowledged segments are deleted.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ._files import atomic_write, fsync_dir
from ._records import frame, iter_records, valid_end
from ._seal import Sealer, SpoolKeyError, unseal

__all__ = ["DEFAULT_SEGMENT_BYTES", "Position", "Spool", "has_unsent"]

DEFAULT_SEGMENT_BYTES = 8 << 20
ACKED_FILE = "acked.json"
_SEGMENT_RE = re.compile(r"^(\d{10})\.seg$")

log = logging.getLogger("stepwatch.spool")


@dataclass(frozen=True, order=True, slots=True)
class Position:
    """Where reading resumes: all bytes before ``offset`` of ``segment``, and earlier segments."""

    segment: int = 0
    offset: int = 0


def _segment_name(index: int) -> str:
    return f"{index:010d}.seg"


def _load_acked(path: Path) -> Position:
    try:
        doc = json.loads((path / ACKED_FILE).read_bytes())
        return Position(int(doc["segment"]), int(doc["offset"]))
    except (OSError, ValueError, KeyError, TypeError):
        return Position()


def _segments(path: Path) -> list[int]:
    return sorted(int(m.group(1)) for p in path.iterdir() if (m := _SEGMENT_RE.match(p.name)))


def has_unsent(path: Path) -> bool:
    """Whether the spool in ``path`` may hold records not yet acknowledged, from file names and
    sizes alone (no record is read): cheap enough to ask of every spool on a node. A torn tail
    counts as unsent until the spool is opened."""
    try:
        acked = _load_acked(path)
        for index in _segments(path):
            if index >= acked.segment:
                size = (path / _segment_name(index)).stat().st_size
                if size > (acked.offset if index == acked.segment else 0):
                    return True
    except FileNotFoundError:  # deleted while looking: nothing left there
        return False
    return False


def _read_range(path: Path, begin: int, end: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(begin)
        return f.read(end - begin)


class Spool:
    """One writer's append-only log in ``path``; safe to append and read from two threads.

    Args:
        path: the directory (created if missing), one per source.
        max_bytes: cap on segment bytes on disk; ``append`` refuses records past it.
        segment_bytes: size at which the active segment is sealed and a new one begun.
        sync: fsync every append (turn off only for throwaway spools).
        sealer: seals every record appended and opens sealed ones read (None: plain); a
            spool with records this cannot open raises SpoolKeyError here, not when shipping.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_bytes: int | None = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        sync: bool = True,
        sealer: Sealer | None = None,
    ) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        if max_bytes is not None:
            segment_bytes = min(segment_bytes, max(1, max_bytes // 4))
        self._segment_bytes = segment_bytes
        self._sync = sync
        self._sealer = sealer
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._sealed: dict[int, int] = {}  # sealed segment -> offset past its last intact record
        self._disk: dict[int, int] = {}  # sealed segment -> bytes on disk, for the cap
        self._acked = _load_acked(self.path)
        self._active, self._written = self._scan()
        self._delete_acked()
        self._check_key()

    @property
    def sealer(self) -> Sealer | None:
        """What seals this spool's records (None: plain): a spool kept beside it seals alike."""
        return self._sealer

    def _scan(self) -> tuple[int, int]:
        """Find existing segments; append to the last one only if its tail is intact."""
        indices = _segments(self.path)
        for index in indices:
            data = (self.path / _segment_name(index)).read_bytes()
            self._sealed[index], self._disk[index] = valid_end(data), len(data)
        if indices and indices[-1] >= self._acked.segment:
            last = indices[-1]
            if self._sealed[last] == self._disk[last]:
                del self._disk[last]
                return last, self._sealed.pop(last)
        return max([*indices, self._acked.segment]) + 1, 0

    def _check_key(self) -> None:
        """Open the first unsent record, so a missing or wrong key is said now, not when shipping
        (a spool directory has one writer, so its records share one key)."""
        next(self._records(self._acked, strict=True), None)

    @property
    def acked(self) -> Position:
        """Everything before this position was acknowledged by the server."""
        with self._lock:
            return self._acked

    @property
    def written(self) -> Position:
        """Everything before this position is durably written."""
        with self._lock:
            return Position(self._active, self._written)

    @property
    def size_bytes(self) -> int:
        """Bytes of segments on disk (what ``max_bytes`` caps)."""
        with self._lock:
            return sum(self._disk.values()) + self._written

    def append(self, payload: bytes, *, past_cap: bool = False) -> bool:
        """Write one record durably; False (nothing written) when it would pass ``max_bytes``.

        ``past_cap`` writes it even then: for the one small last word of a writer (how much
        it dropped), which must not be lost to the very cap it reports on.
        """
        record = frame(self._sealer.seal(payload) if self._sealer else payload)
        with self._lock:
            size = sum(self._disk.values()) + self._written
            full = self.max_bytes is not None and size + len(record) > self.max_bytes
            if full and not past_cap:
                return False
            if self._written >= self._segment_bytes:
                self._seal(self._written)
            fd = self._fd if self._fd is not None else self._open_active()
            try:
                self._write(fd, record)
            except OSError:
                self._seal(os.fstat(fd).st_size)
                raise
            self._written += len(record)
            return True

    def _open_active(self) -> int:
        path = self.path / _segment_name(self._active)
        created = not path.exists()
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if created and self._sync:
            fsync_dir(self.path)
        return self._fd

    def _write(self, fd: int, record: bytes) -> None:
        view = memoryview(record)
        while view:
            view = view[os.write(fd, view) :]
        if self._sync:
            os.fdatasync(fd)

    def _seal(self, disk_bytes: int) -> None:
        """Close the active segment; later appends go to a new one (never after a torn record)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._sealed[self._active] = self._written
        self._disk[self._active] = disk_bytes
        self._active += 1
        self._written = 0

    def records(self, start: Position | None = None) -> Iterator[tuple[Position, bytes]]:
        """Intact records from ``start`` (default: acked), each with the position just after it.

        A sealed record that does not open (altered since) ends its segment, as a torn one does.
        """
        with self._lock:
            start = self._acked if start is None else start
        return self._records(start, strict=False)

    def _records(self, start: Position, strict: bool) -> Iterator[tuple[Position, bytes]]:
        with self._lock:
            plan = [(i, end) for i, end in sorted(self._sealed.items()) if i >= start.segment]
            if self._written and self._active >= start.segment:
                plan.append((self._active, self._written))
        for index, end in plan:
            begin = start.offset if index == start.segment else 0
            if end <= begin:
                continue
            try:
                data = _read_range(self.path / _segment_name(index), begin, end)
            except FileNotFoundError:
                continue
            for record_end, payload in iter_records(data, begin):
                try:
                    opened = unseal(payload, self._sealer, self.path)
                except SpoolKeyError as exc:
                    if strict:
                        raise
                    log.error("%s: the rest of segment %d is skipped", exc, index)
                    break
                yield Position(index, record_end), opened

    def pending(self) -> bool:
        """Whether any written record is not yet acknowledged."""
        with self._lock:
            ends = {**self._sealed, self._active: self._written}
            acked = self._acked
        return any(
            end > (acked.offset if i == acked.segment else 0)
            for i, end in ends.items()
            if i >= acked.segment
        )

    def ack(self, position: Position) -> None:
        """Persist that everything before ``position`` was delivered; delete spent segments."""
        with self._lock:
            if position <= self._acked:
                return
            doc = {"segment": position.segment, "offset": position.offset}
            atomic_write(self.path / ACKED_FILE, json.dumps(doc).encode())
            self._acked = position
            self._delete_acked()

    def _delete_acked(self) -> None:
        acked = self._acked
        for index, end in list(self._sealed.items()):
            if index < acked.segment or (index == acked.segment and acked.offset >= end):
                (self.path / _segment_name(index)).unlink(missing_ok=True)
                del self._sealed[index], self._disk[index]

    def close(self) -> None:
        """Close the active segment's file; records already written stay readable."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
