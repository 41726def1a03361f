"""The collector's HTTP API from outside it: one client that the CLI's commands and
`stepwatch top` share (address, token, TLS, timeouts, paging, errors in one line)."""

from ._api import CollectorClient
from ._http import NEXT_CURSOR, ApiSession, ClientError

__all__ = ["NEXT_CURSOR", "ApiSession", "ClientError", "CollectorClient"]
