"""State that outlives the collector: parts that snapshot and restore themselves, and the
worker that checkpoints them into the store.

Every part is checkpointed together, in one store transaction, with the store
position the detector's state stands at: at start each part is restored, and
the data since that position is replayed, so a restart (graceful or not)
continues where the last checkpoint left off instead of starting cold.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from ._periodic import Periodic
from .store import Checkpoint, Position, Store

__all__ = ["DEFAULT_CHECKPOINT_INTERVAL_S", "CheckpointWorker", "Durable", "restore_parts"]

log = logging.getLogger("stepwatch.durable")

#: How often the collector checkpoints its state while it runs (and once more at shutdown).
DEFAULT_CHECKPOINT_INTERVAL_S = 60.0


class Durable(Protocol):
    """A part of the collector whose state survives restarts."""

    #: The key of this part in the store's checkpoint.
    name: str

    def snapshot(self) -> bytes:
        """A consistent copy of the part's state (thread-safe; the checkpoint worker calls it)."""
        ...

    def restore(self, state: bytes) -> None:
        """Take back a snapshot, once, before ``start()``; ValueError for one it cannot read
        (an unknown or old format), leaving the part empty."""
        ...


def restore_parts(parts: Sequence[Durable], checkpoint: Checkpoint | None) -> set[str]:
    """Restore each part from its snapshot; the names of those restored. A part whose snapshot
    is missing or unreadable (another format, another release) starts empty, and says so."""
    restored: set[str] = set()
    for part in parts:
        blob = checkpoint.parts.get(part.name) if checkpoint else None
        if blob is None:
            log.info("no checkpoint of %s: it starts empty", part.name)
            continue
        try:
            part.restore(blob)
        except ValueError as exc:
            log.warning("the checkpoint of %s is not readable, it starts empty: %s", part.name, exc)
            continue
        restored.add(part.name)
    return restored


class CheckpointWorker:
    """Checkpoints ``parts`` every ``interval_s`` seconds on a thread of its own, and at stop.

    Args:
        store: where checkpoints go.
        parts: what to checkpoint (more may be added to ``parts`` before ``start``).
        position: the store position the snapshots just taken stand at (asked after them).
        barrier: waits until what the parts handed to the store so far is stored, so that a
            checkpoint is never ahead of the records its parts wrote.
        interval_s: seconds between checkpoints.
    """

    def __init__(
        self,
        store: Store,
        parts: Sequence[Durable],
        *,
        position: Callable[[], Position],
        barrier: Callable[[], None] = lambda: None,
        interval_s: float = DEFAULT_CHECKPOINT_INTERVAL_S,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"the checkpoint interval must be above 0 s, got {interval_s}")
        self.parts = list(parts)
        self._store, self._position, self._barrier = store, position, barrier
        self._worker = Periodic(
            self.checkpoint,
            interval_s,
            name="stepwatch-checkpoint",
            failed="checkpoint failed; the previous one stays",
            log=log,
        )
        #: How many checkpoints were saved (for tests and the collector's own figures).
        self.saved = 0
        self._running = False

    def start(self) -> None:
        self._running = True
        self._worker.start()

    def halt(self) -> None:
        """End the thread (after the checkpoint it may be taking): before the parts stop,
        so that none is asked for a snapshot while it stops."""
        self._worker.stop()

    def stop(self) -> None:
        """End the thread, then save a last checkpoint (once the parts have stopped)."""
        if not self._running:
            return
        self._running = False
        self.halt()
        self._worker.run_once()

    def checkpoint(self) -> Position:
        """Snapshot every part and save them together; the position saved."""
        blobs = {part.name: part.snapshot() for part in self.parts}
        position = self._position()
        self._barrier()
        self._store.save_checkpoint(blobs, position)
        self.saved += 1
        return position
