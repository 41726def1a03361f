"""The durable spool of batches and the sender that ships it to the collector, or to a broker
(stdlib only; sealing with an encryption key needs ``cryptography``, a broker ``pika``).

Every batch is framed, checksummed (sealed, with a key) and fsync'ed to an append-only
segment before any network I/O; the sender resumes from the acked position after a
restart; a writer holds its spool's lock while it lives, so the next stepwatch process on the
node ships a spool whose writer is gone, and ``sync`` uploads spools written offline. Spools are
capped (by default the smaller of 2 GiB and a tenth of the free space), and each is deleted
once everything in it was delivered.
"""

from .._tls import ClientTls
from ._backoff import Backoff
from ._cap import DEFAULT_CAP_BYTES, ENV_MAX_SPOOL, spool_cap
from ._cleanup import remove_delivered, remove_run_dir
from ._fake import FakeCollector, Faults
from ._http import AuthError, Connect, HttpClient, Response, TransportError
from ._lock import LOCK_FILE, SpoolLock
from ._meta import NODE_SPOOL, RUN_FILE, read_run, write_run
from ._orphans import OrphanShipper
from ._seal import Sealer, SpoolKeyError
from ._sender import Sender
from ._ship import REJECTED_DIR, ShipStats
from ._spool import Position, Spool, has_unsent
from ._sync import SyncResult, sync
from ._transport import Transport, open_transport

__all__ = [
    "DEFAULT_CAP_BYTES",
    "ENV_MAX_SPOOL",
    "LOCK_FILE",
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
    "OrphanShipper",
    "Position",
    "Response",
    "Sealer",
    "Sender",
    "ShipStats",
    "Spool",
    "SpoolKeyError",
    "SpoolLock",
    "SyncResult",
    "Transport",
    "TransportError",
    "has_unsent",
    "open_transport",
    "read_run",
    "remove_delivered",
    "remove_run_dir",
    "spool_cap",
    "sync",
    "write_run",
]
