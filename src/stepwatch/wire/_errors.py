"""The one error type of the wire layer, so the server can map it to a 400 with its message."""

from __future__ import annotations


class WireError(ValueError):
    """A batch that cannot be accepted; the message says what is wrong with it."""
