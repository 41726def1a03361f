"""Words for what commands print: a count with its noun agreeing ("1 rule", "3 batches")."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``count`` and the noun, in the plural (``nouns``, else noun + "s") unless it is 1."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"
