"""The one exception the store raises for its own failures (open, lock, corrupt file)."""

from __future__ import annotations


class StoreError(Exception):
    """The store file cannot be used: locked by another process, corrupt, or of another version.

    ``holder`` is the process id of the other process holding the file, when that is why.
    """

    def __init__(self, message: str, holder: int | None = None) -> None:
        super().__init__(message)
        self.holder = holder
