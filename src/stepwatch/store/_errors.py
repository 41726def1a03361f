"""The one exception the store raises for its own failures (open, lock, corrupt file)."""

from __future__ import annotations


class StoreError(Exception):
    """The store file cannot be used: locked by another process, corrupt, or of another version."""
