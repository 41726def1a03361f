"""The collector: HTTP ingest with group commit, the query and runs API, and the web page."""

from ._app import DEFAULT_MAX_BODY_BYTES, create_app
from ._auth import Auth, is_loopback
from ._guards import HostAllowList
from ._serve import ServerThread, serve

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "Auth",
    "HostAllowList",
    "ServerThread",
    "create_app",
    "is_loopback",
    "serve",
]
