"""Who owns a spool directory now: an exclusive ``flock`` on its ``writer.lock``.

Why a lock and not a pid file: the kernel drops the lock the moment its holder dies (``kill -9``
included), so a writer that is gone can never look alive because its pid was reused, and a live
one never looks gone. The writer holds it for its whole life; whoever ships the spool after the
writer is gone (``sync``, or the next stepwatch process on the node) holds it while shipping, so
a spool never has two shippers at once.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["LOCK_FILE", "SpoolLock"]

LOCK_FILE = "writer.lock"


class SpoolLock:
    """A held lock on one spool directory; ``release`` (or leaving ``with``) lets it go."""

    def __init__(self, fd: int, directory: Path) -> None:
        self._fd: int | None = fd
        self.directory = directory

    @classmethod
    def take(cls, directory: Path) -> SpoolLock | None:
        """The lock of ``directory`` (an existing spool directory), or None while another
        process (or another holder in this one) has it."""
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())  # who holds it, for people looking
        return cls(fd, directory)

    def release(self) -> None:
        """Let the lock go (closing the file drops it); safe to call twice."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> SpoolLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
