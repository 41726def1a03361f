"""Sizes as people write them in options and environment variables: ``512MiB``, ``2G``, bytes."""

from __future__ import annotations

import re

__all__ = ["parse_size"]

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE_RE = re.compile(r"\s*(\d+)\s*(?:([kmgt])(?:i?b)?|b?)\s*", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes from ``"1048576"``, ``"512MiB"``, ``"2G"`` (binary units); ValueError otherwise."""
    match = _SIZE_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"not a size: {text!r} (bytes, or a number with KiB, MiB, GiB or TiB)")
    return int(match.group(1)) * _UNITS[(match.group(2) or "").lower()]
