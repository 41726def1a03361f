"""The durable spool of batches and the sender that ships it to the collector (stdlib only;
sealing with an encryption key needs ``cryptography``).

Every batch is framed, checksummed (sealed, with a key) and fsync'ed to an append-only
segment before any network I/O; the sender resumes from the acked position after a
restart, and ``sync`` uploads spools written offline or left by a killed process.
"""

from .._tls import ClientTls
from ._backoff import Backoff
from ._fake import FakeCollector, Faults
from ._http import AuthError, Connect, HttpClient, Response, TransportError
from ._meta import NODE_SPOOL, RUN_FILE, read_run, write_run
from ._seal import Sealer, SpoolKeyError
from ._sender import Sender
from ._ship import REJECTED_DIR, ShipStats
from ._spool import Position, Spool
from ._sync import SyncResult, sync

__all__ = [
    "NODE_SPOOL",
    "REJECTED_DIR",
    "RUN_FILE",
    "AuthError",
    "Backoff",
    "ClientTls",
    "Connect",
    "FakeCollector",
    "Faults",
    "HttpClient",
    "Position",
    "Response",
    "Sealer",
    "Sender",
    "ShipStats",
    "Spool",
    "SpoolKeyError",
    "SyncResult",
    "TransportError",
    "read_run",
    "sync",
    "write_run",
]
