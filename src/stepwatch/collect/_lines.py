"""Turn raw output lines into log events: one per line, one per whole Python traceback.

Shared by the file tail and the child-process pump, so a traceback reads the
same whichever way it reached us. Detection rules read the events' text and
``data`` (``level``, ``traceback``, ``exception``), never raw bytes.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from ..model import Event

__all__ = ["LineBuffer", "LineGrouper", "clean_line", "detect_level"]

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# torch's excepthook writes "[rank3]: " (global rank); torchrun --tee writes "[default3]:"
# (role and local rank) or its template's "[3]:"; both may prefix one line.
_GLOBAL_RANK_RE = re.compile(r"^\[rank(\d{1,7})\]: ?")
_ROLE_RANK_RE = re.compile(r"^\[(?:[A-Za-z_][A-Za-z_-]*?)?(\d{1,7})\]:")
_HEADER_RE = re.compile(r"^[ +|]*(?:Exception Group )?Traceback \(most recent call last\):$")
_CHAIN_MARKERS = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_FINAL_RE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s.*|:)?$")
_GROUP_FINAL_RE = re.compile(r"^  \| ([A-Za-z_][\w.]*)(?::\s.*)?$")
_GROUP_END_RE = re.compile(r"^\s+\+-{3,}$")

_LEVEL_WORDS = {
    "CRITICAL": "error",
    "FATAL": "error",
    "ERROR": "error",
    "WARNING": "warning",
    "WARN": "warning",
    "INFO": "info",
    "DEBUG": "debug",
    "TRACE": "debug",
}
_LEVEL_LETTERS = {"F": "error", "E": "error", "W": "warning", "I": "info", "D": "debug"}
# c10 / glog: "[W socket.cpp:663] ...", "[W1108 12:00:00.1 ProcessGroupNCCL.cpp:12] ...",
# "E1108 12:00:00.123456  4242 file.cc:12] ...".
_GLOG_RE = re.compile(
    r"^\[([DIWEF])\d*\s[^\]]*:\d+\]|^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\]"
)
_KEYED_RE = re.compile(r"""\blevel(?:name)?"?\s*[=:]\s*"?([A-Za-z]+)""")
_WORD_RE = re.compile(r"(?<![\w.])(CRITICAL|FATAL|ERROR|WARNING|WARN|INFO|DEBUG|TRACE)(?!\w)")
_EXC_RE = re.compile(r"^(?:[A-Za-z_][\w.]*)?(?:Error|Exception):(?:\s|$)")
_PYWARN_RE = re.compile(r"(?<!\w)\w*Warning:(?:\s|$)")


def clean_line(raw: bytes | str) -> str:
    """Decode a line (UTF-8, bad bytes replaced) and drop what a terminal would not show."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = text.rstrip("\r\n")
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    if "\r" in text:  # a redrawn progress bar: only its last drawing is what a person saw
        drawn = [part for part in text.split("\r") if part.strip()]
        text = drawn[-1] if drawn else ""
    return text.replace("\x00", "").rstrip()


def detect_level(line: str) -> str | None:
    """The severity a line announces through a common log format, or None."""
    head = line[:200]
    if m := _GLOG_RE.match(head):
        return _LEVEL_LETTERS[m.group(1) or m.group(2)]
    if (m := _KEYED_RE.search(head)) and m.group(1).upper() in _LEVEL_WORDS:
        return _LEVEL_WORDS[m.group(1).upper()]
    if m := _WORD_RE.search(head):
        return _LEVEL_WORDS[m.group(1)]
    if _HEADER_RE.match(line) or _EXC_RE.match(line):
        return "error"
    if _PYWARN_RE.search(head):
        return "warning"
    return None


def _split_rank(text: str) -> tuple[str | None, str]:
    """The rank a launcher's prefix names (the innermost prefix wins), and the line without it."""
    rank: str | None = None
    while m := _GLOBAL_RANK_RE.match(text) or _ROLE_RANK_RE.match(text):
        rank, text = str(int(m.group(1))), text[m.end() :]
    return rank, text


class LineBuffer:
    """Split a byte stream into lines, holding the unfinished last one; memory stays bounded.

    A line longer than ``max_line_bytes`` keeps its start and a note of the
    bytes cut; an unfinished progress bar keeps only its latest drawing.
    """

    def __init__(self, max_line_bytes: int = 65536) -> None:
        self._max = max_line_bytes
        self._buf = bytearray()
        self._cut = 0  # bytes dropped from the current line

    def push(self, chunk: bytes) -> list[bytes]:
        """Add bytes; return the lines they complete, without their newline."""
        lines: list[bytes] = []
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            self._append(chunk[start:nl])
            lines.append(self._take())
            start = nl + 1
        self._append(chunk[start:])
        return lines

    def rest(self) -> bytes | None:
        """The unfinished last line (at end of stream), or None when there is none."""
        if not self._buf and not self._cut:
            return None
        return self._take()

    def _append(self, part: bytes) -> None:
        if self._cut:
            self._cut += len(part)
            return
        self._buf += part
        if len(self._buf) <= self._max:
            return
        redrawn = self._buf.rstrip(b"\r").rfind(b"\r")
        if redrawn > 0:
            del self._buf[:redrawn]
        if len(self._buf) > self._max:
            self._cut = len(self._buf) - self._max
            del self._buf[self._max :]

    def _take(self) -> bytes:
        line = bytes(self._buf)
        if self._cut:
            line += f" ...[{self._cut} bytes cut]".encode()
        self._buf.clear()
        self._cut = 0
        return line


@dataclass
class _Traceback:
    """A traceback being gathered for one rank; bounded: keeps a head and a tail of lines."""

    ts: float
    last_ts: float
    labels: dict[str, str]
    head: list[str]
    tail: deque[str]
    head_max: int
    count: int = 0
    stage: str = "body"  # body -> ended (final line seen) -> chain (marker seen) -> body
    exception: str | None = None
    blanks: int = 0  # blank lines held until a line shows they belong here

    def add(self, line: str, ts: float) -> None:
        for _ in range(self.blanks):
            self._keep("")
        self.blanks = 0
        self._keep(line)
        self.last_ts = ts

    def _keep(self, line: str) -> None:
        self.count += 1
        if len(self.head) < self.head_max:
            self.head.append(line)
        else:
            self.tail.append(line)

    def step(self, line: str, ts: float) -> bool:
        """Take ``line`` if it continues this traceback; False means the traceback is over."""
        if not line.strip():
            self.blanks += 1
            return True
        if line in _CHAIN_MARKERS and self.stage in ("body", "ended"):
            self.stage = "chain"
        elif self.stage == "chain" and _HEADER_RE.match(line):
            self.stage = "body"
        elif self.stage != "body" or line.startswith("Traceback"):
            return False
        elif line[0] in " \t":
            self._see_group_line(line)
        elif m := _FINAL_RE.match(line):
            self.stage, self.exception = "ended", m.group(1)
        else:
            return False
        self.add(line, ts)
        return True

    def _see_group_line(self, line: str) -> None:
        if m := _GROUP_FINAL_RE.match(line):
            self.exception = m.group(1)
        elif _GROUP_END_RE.match(line) and self.exception is not None:
            self.stage = "ended"


class LineGrouper:
    """Group lines into log events: a Python traceback, chained sections included, is one event.

    Lines prefixed by torchrun (``[rank3]:``, ``[default3]:``) are labelled with
    that rank (with a role prefix it is torchrun's local rank) and grouped per
    rank, so tracebacks of ranks that interleave are not mixed. A traceback is
    held until the line after it shows it is over, ``poll`` finds it quiet for
    ``quiet_s``, or ``flush``. Not thread-safe: callers that share one lock it.

    Args:
        labels: labels every event carries (``path``, ``stream``...).
        quiet_s: seconds without a line after which a held traceback is emitted.
        max_lines: lines one traceback event keeps (its head and tail; a marker replaces the rest).
        max_line_chars: characters one line keeps.
    """

    def __init__(
        self,
        labels: Mapping[str, str] | None = None,
        *,
        quiet_s: float = 2.0,
        max_lines: int = 200,
        max_line_chars: int = 8192,
    ) -> None:
        if max_lines < 2:
            raise ValueError(f"max_lines must be >= 2, got {max_lines}")
        self._labels = dict(labels or {})
        self._quiet_s = quiet_s
        self._max_lines = max_lines
        self._max_chars = max_line_chars
        self._open: dict[str | None, _Traceback] = {}

    def feed(self, line: bytes | str, ts: float) -> list[Event]:
        """Take one line (without its newline) that arrived at ``ts``; return finished events."""
        rank, text = _split_rank(clean_line(line))
        text = self._clip(text)
        events: list[Event] = []
        if (held := self._open.get(rank)) is not None:
            if held.step(text, ts):
                return events
            events.append(self._finish(rank))
        if not text.strip():
            return events
        if _HEADER_RE.match(text):
            self._open[rank] = self._start(text, ts, rank)
            return events
        events.append(self._line_event(text, ts, rank))
        return events

    def poll(self, now: float) -> list[Event]:
        """Emit the tracebacks that have been quiet for ``quiet_s`` by ``now``."""
        quiet = [r for r, tb in self._open.items() if now - tb.last_ts >= self._quiet_s]
        return [self._finish(rank) for rank in quiet]

    def flush(self) -> list[Event]:
        """Emit every held traceback, complete or not (the stream has ended)."""
        return [self._finish(rank) for rank in list(self._open)]

    def _labels_for(self, rank: str | None) -> dict[str, str]:
        return {**self._labels, "rank": rank} if rank is not None else dict(self._labels)

    def _clip(self, text: str) -> str:
        if len(text) <= self._max_chars:
            return text
        return f"{text[: self._max_chars]} ...[{len(text) - self._max_chars} chars cut]"

    def _line_event(self, text: str, ts: float, rank: str | None) -> Event:
        level = detect_level(text)
        data = {"level": level} if level else {}
        return Event(ts=ts, kind="log", text=text, labels=self._labels_for(rank), data=data)

    def _start(self, header: str, ts: float, rank: str | None) -> _Traceback:
        head_max = max(1, self._max_lines // 4)
        tail: deque[str] = deque(maxlen=self._max_lines - head_max)
        tb = _Traceback(ts, ts, self._labels_for(rank), [], tail, head_max)
        tb.add(header, ts)
        return tb

    def _finish(self, rank: str | None) -> Event:
        tb = self._open.pop(rank)
        omitted = tb.count - len(tb.head) - len(tb.tail)
        marker = [f"... [{omitted} lines omitted] ..."] if omitted else []
        data: dict[str, object] = {"traceback": True, "lines": tb.count, "level": "error"}
        if tb.exception is not None:
            data["exception"] = tb.exception
        if tb.stage != "ended":
            data["incomplete"] = True
        if omitted:
            data["omitted"] = omitted
        text = "\n".join([*tb.head, *marker, *tb.tail])
        return Event(ts=tb.ts, kind="log", text=text, labels=tb.labels, data=data)
