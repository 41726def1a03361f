"""A streaming reader of Chrome/Kineto trace JSON (plain or gzip): one event at a time from the
``traceEvents`` array, so memory follows the largest event, never the file (a profile of a
gigabyte is read in a few megabytes)."""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

__all__ = ["TraceError", "TraceFile", "TraceSource"]

#: Where a trace is read from: a path, its bytes (gzip or plain) or a binary file object.
TraceSource = str | Path | bytes | io.BufferedIOBase | io.RawIOBase

_WS = re.compile(r"[ \t\n\r]*")
#: A value that is still incomplete past this many characters is a broken file, not a big one.
_MAX_VALUE_CHARS = 64 << 20
_GZIP_MAGIC = b"\x1f\x8b"


class TraceError(ValueError):
    """A file that is no Chrome/Kineto trace, or one broken past repair."""


class TraceFile:
    """An open trace: ``events()`` yields its events in file order; ``metadata`` holds the
    top-level keys besides ``traceEvents`` (complete once the events are read, since Kineto
    writes some after them).

    ``source`` is a path, the trace's bytes or a binary file object (read from where it
    stands, left open: its owner closes it); ``name`` is what errors call the trace (default:
    the path, else "the trace"). Use as a context manager; ``chunk_chars`` is how much is read
    at a time.
    """

    def __init__(
        self, source: TraceSource, chunk_chars: int = 1 << 20, name: str | None = None
    ) -> None:
        self.name = name or (str(source) if isinstance(source, str | Path) else "the trace")
        self.metadata: dict[str, Any] = {}
        self._chunk = chunk_chars
        with ExitStack() as opening:  # closed here only if opening fails
            self._stream = _open_text(source, opening)
            self._opened = opening.pop_all()
        self._buf = ""
        self._pos = 0
        self._eof = False
        self._decode = json.JSONDecoder().raw_decode

    def __enter__(self) -> TraceFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._opened.close()

    def events(self) -> Iterator[dict[str, Any]]:
        """Every event of the file, in file order: a Chrome JSON object's ``traceEvents``, or
        the array of the Chrome array format (whose closing bracket may be missing)."""
        first = self._peek()
        if first == "[":
            yield from self._array(closing_optional=True)
            return
        if first != "{":
            raise self._error("a trace starts with { or [")
        self._pos += 1
        while self._peek() != "}":
            key = self._value()
            if not isinstance(key, str) or self._peek() != ":":
                raise self._error("expected a key and ':'")
            self._pos += 1
            if key == "traceEvents":
                yield from self._array(closing_optional=False)
            else:
                self.metadata[key] = self._value()
            if self._peek() == ",":
                self._pos += 1
            elif self._peek() != "}":
                raise self._error("expected ',' or '}' after a value")

    def _array(self, closing_optional: bool) -> Iterator[dict[str, Any]]:
        """The events of an array, each decoded alone (trailing commas tolerated)."""
        if self._peek() != "[":
            raise self._error("traceEvents is not an array")
        self._pos += 1
        while True:
            c = self._peek(eof_ok=closing_optional)
            if c == "]":
                self._pos += 1
                return
            if c == "":
                return
            if c == ",":
                self._pos += 1
                continue
            event = self._value()
            if isinstance(event, dict):
                yield event
            if self._peek(eof_ok=closing_optional) not in (",", "]", ""):
                raise self._error("expected ',' or ']' after an event")

    def _peek(self, eof_ok: bool = False) -> str:
        """The next character that is not white space ('' at the end when ``eof_ok``)."""
        while True:
            self._pos = _WS.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._more():
                if eof_ok:
                    return ""
                raise self._error("the file ends inside the trace")

    def _value(self) -> Any:
        """The JSON value at the next non-blank position, reading on while it is incomplete."""
        self._peek()
        while True:
            try:
                value, end = self._decode(self._buf, self._pos)
            except json.JSONDecodeError:
                if len(self._buf) - self._pos > _MAX_VALUE_CHARS or not self._more():
                    raise self._error("malformed JSON") from None
                continue
            if end < len(self._buf) or self._eof or not self._more():  # a number may go on
                self._pos = end
                return value

    def _more(self) -> bool:
        """Read the next chunk after what is left unread; False at the end of the file."""
        chunk = self._stream.read(self._chunk)
        if not chunk:
            self._eof = True
            return False
        self._buf = self._buf[self._pos :] + chunk
        self._pos = 0
        return True

    def _error(self, what: str) -> TraceError:
        near = self._buf[self._pos : self._pos + 40]
        return TraceError(f"{self.name}: not a Chrome/Kineto trace: {what} (near {near!r})")


def _open_text(source: TraceSource, opened: ExitStack) -> io.TextIOWrapper:
    """The trace as text, gunzipped when it is gzip (by its magic bytes, not its name); what
    is opened here is closed by ``opened``, which leaves a file object given open."""
    if isinstance(source, bytes):
        raw: io.BufferedIOBase | io.RawIOBase = io.BytesIO(source)
    elif isinstance(source, str | Path):
        raw = opened.enter_context(open(source, "rb", buffering=0))
    else:
        raw = source
    buffered = io.BufferedReader(raw)  # peek: the magic bytes stay in the stream
    opened.callback(buffered.detach)
    text: io.TextIOWrapper
    if buffered.peek(2)[:2] == _GZIP_MAGIC:
        gunzipped = opened.enter_context(gzip.GzipFile(fileobj=buffered))
        text = io.TextIOWrapper(gunzipped, encoding="utf-8")
    else:
        text = io.TextIOWrapper(buffered, encoding="utf-8")
    opened.callback(text.detach)
    return text
