"""Elasticsearch's date math (``now-5m``, ``now/d``, ``<date>||+1h``), in UTC seconds."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from ._errors import QueryError

_UNITS = {"s": 1, "m": 60, "h": 3600, "H": 3600, "d": 86_400, "w": 604_800}
_UNITS |= {"M": 30 * 86_400, "y": 365 * 86_400}
_MATH = re.compile(r"([+-])(\d+)([smhHdwMy])|/([smhHdwMy])")


def date_math(given: str, now: float, round_up: bool, millis: bool) -> float:
    """Seconds for ``now-5m``, ``now/d``, an ISO date or ``<date>||+1h`` (UTC)."""
    if given.startswith("now"):
        anchor, math_part = now, given[3:]
    else:
        base, _, math_part = given.partition("||")
        anchor = _instant(base, millis)
    at = anchor
    pos = 0
    while pos < len(math_part):
        step = _MATH.match(math_part, pos)
        if step is None:
            raise QueryError(f"bad date math {given!r}")
        if step.group(4):
            unit = _UNITS[step.group(4)]
            at = math.floor(at / unit) * unit + (unit - 0.001 if round_up else 0)
        else:
            sign = 1 if step.group(1) == "+" else -1
            at += sign * int(step.group(2)) * _UNITS[step.group(3)]
        pos = step.end()
    return at


def _instant(text: str, millis: bool) -> float:
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return float(text) / 1000 if millis else float(text)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise QueryError(f"bad date {text!r}: give an ISO 8601 date, epoch or now-...") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
