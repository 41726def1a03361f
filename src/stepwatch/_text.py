"""Words for what commands print: a count with its noun agreeing ("1 rule", "3 batches"), a
duration ("4m 05s"), a collector that does not answer."""

from __future__ import annotations

import re

from ._tls import tls_hint

__all__ = ["format_duration", "plural", "unreachable"]


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``count`` and the noun, in the plural (``nouns``, else noun + "s") unless it is 1."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


def unreachable(url: str, error: BaseException) -> str:
    """A collector that does not answer, in words, with what to do about it."""
    reason = re.sub(r"^\[Errno -?\d+\]\s*", "", str(error)).lower() or type(error).__name__
    hint = tls_hint(error, url)
    if hint is not None:
        return f"cannot talk to the collector at {url}: {hint} ({reason})"
    return (
        f"cannot reach the collector at {url} ({reason}): start one (stepwatch server) "
        "or name it with --server URL"
    )


def format_duration(seconds: float) -> str:
    """Two units at most: 45s, 4m 05s, 3h 12m, 2d 07h."""
    s = max(0, int(seconds))
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {s:02d}s" if minutes else f"{s}s"
