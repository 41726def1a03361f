"""Sizes as people write them in options and environment variables: ``512MiB``, ``2G``, bytes."""

from __future__ import annotations

import re

__all__ = ["parse_share", "parse_size", "parse_size_or_share"]

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE_RE = re.compile(r"\s*(\d+)\s*(?:([kmgt])(?:i?b)?|b?)\s*", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes from ``"1048576"``, ``"512MiB"``, ``"2G"`` (binary units); ValueError otherwise."""
    match = _SIZE_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"not a size: {text!r} (bytes, or a number with KiB, MiB, GiB or TiB)")
    return int(match.group(1)) * _UNITS[(match.group(2) or "").lower()]


_SHARE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*%\s*")


def parse_share(text: str, of: str) -> float | None:
    """The fraction ``"80%"`` names, in (0, 1]; None when ``text`` is not a percentage.
    ``of`` names the whole in the error for a share outside (0, 100]%."""
    if (share := _SHARE_RE.fullmatch(text)) is None:
        return None
    pct = float(share.group(1))
    if not 0 < pct <= 100:
        raise ValueError(f"a share of {of} lies in (0, 100]%, got {text.strip()!r}")
    return pct / 100


def parse_size_or_share(text: str, whole: int, of: str) -> int:
    """Bytes from a size (see ``parse_size``) or a share of ``whole`` bytes (``"25%"``)."""
    if (share := parse_share(text, of)) is not None:
        return int(whole * share)
    try:
        return parse_size(text)
    except ValueError:
        raise ValueError(
            f"not a size: {text!r} (bytes, a number with KiB, MiB, GiB or TiB, or a share of "
            f"{of} such as 25%)"
        ) from None
