"""The collector: HTTP ingest with group commit, the query and runs API, and the web page."""

from .._tls import ServerTls
from ._app import create_app
from ._auth import CALLER_HEADER, is_loopback
from ._fleet_proxy import HOP_HEADER
from ._guards import HostAllowList
from ._options import DEFAULT_MAX_BODY_BYTES, CollectorOptions
from ._serve import ServerThread, serve
from ._upkeep import store_limits, store_memory_limit

__all__ = [
    "CALLER_HEADER",
    "DEFAULT_MAX_BODY_BYTES",
    "HOP_HEADER",
    "CollectorOptions",
    "ServerThread",
    "ServerTls",
    "HostAllowList",
    "create_app",
    "is_loopback",
    "serve",
    "store_limits",
    "store_memory_limit",
]
