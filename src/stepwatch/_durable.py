"""The checkpoint interface: a part of the collector whose state is kept in the store, so a
restart continues where the last life left off instead of starting over."""

from __future__ import annotations

from typing import Protocol

__all__ = ["Durable"]


class Durable(Protocol):
    """One part of the collector's checkpoint."""

    name: str  # key of this part in the store's checkpoint

    def snapshot(self) -> bytes:
        """A consistent copy of the part's state (thread-safe; the checkpoint worker calls it)."""
        ...

    def restore(self, state: bytes) -> None:
        """Take back a snapshot, once, before ``start()``; ValueError for one it cannot read
        (an unknown or old format), leaving the part empty."""
        ...
