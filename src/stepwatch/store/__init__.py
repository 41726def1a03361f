"""The embedded time-series store: one DuckDB file, written by the collector, queried by the API."""

from ._alert_state import OPEN_STATES, AlertQuery, AlertRow, AlertStates
from ._audit_log import AuditQuery
from ._book_state import ActionQuery
from ._catalogue import LabelMatch, SeriesInfo
from ._checkpoints import Checkpoint, Position
from ._errors import StoreError
from ._paging import Page, every
from ._records import ChainCheck, Head
from ._state import CurrentState
from ._store import Store
from ._tokens import TokenRecord

__all__ = [
    "OPEN_STATES",
    "ActionQuery",
    "AlertQuery",
    "AlertRow",
    "AlertStates",
    "AuditQuery",
    "ChainCheck",
    "Checkpoint",
    "CurrentState",
    "Head",
    "LabelMatch",
    "Page",
    "Position",
    "SeriesInfo",
    "Store",
    "StoreError",
    "TokenRecord",
    "every",
]
