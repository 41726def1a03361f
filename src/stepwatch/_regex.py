"""Regular expressions written by users (silence and route matchers, log rules), compiled by RE2.

Why RE2: it matches in time linear in the text, so a pattern such as ``(a+)+$`` cannot stall
the detector or the notifier on a long label value or log line. It refuses what only a
backtracking engine can do (backreferences, lookarounds) when the pattern is read, never later.
"""

from __future__ import annotations

from typing import Protocol

import re2

__all__ = ["MAX_PATTERN_CHARS", "Regex", "compile_regex"]

#: Longer patterns are refused: they cost memory to compile and are mistakes, not matchers.
MAX_PATTERN_CHARS = 1000


class Regex(Protocol):
    """What stepwatch asks of a compiled pattern."""

    def fullmatch(self, text: str) -> object | None: ...

    def search(self, text: str) -> object | None: ...


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # the ValueError says what is wrong; nothing on stderr
    return options


def compile_regex(pattern: str) -> Regex:
    """``pattern`` compiled; a ValueError naming it and what is wrong when it is refused."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(
            f"regular expression of {len(pattern)} characters is longer than the "
            f"{MAX_PATTERN_CHARS} allowed"
        )
    try:
        compiled: Regex = re2.compile(pattern, _options())
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args else "invalid"
        raise ValueError(
            f"bad regular expression {pattern!r}: {why} (RE2 syntax: no backreferences, "
            "no lookarounds)"
        ) from None
    return compiled
