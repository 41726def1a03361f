"""The embedded time-series store: one DuckDB file, written by the collector, queried by the API."""

from ._alert_state import OPEN_STATES, AlertQuery, AlertRow, AlertStates
from ._analyses import MAX_ANALYSIS_CHARS, StoredAnalysis
from ._audit_log import AuditQuery
from ._book_state import ActionQuery
from ._catalogue import LabelMatch, SeriesInfo
from ._checkpoints import Checkpoint, Position
from ._errors import StoreError
from ._forecasts import Forecasts, StoredForecast, StoredLaw
from ._log_search import LogHit
from ._paging import Page, every
from ._plan import Kept
from ._profiles import MAX_PROFILE_BYTES, ProfileInfo
from ._prune import Pruned
from ._records import ChainCheck, Head
from ._retention import DEFAULT_RETENTION, Retention
from ._space import DiskCap, Space
from ._state import CurrentState
from ._store import Store
from ._summary import RunSummary
from ._tokens import TokenRecord

__all__ = [
    "DEFAULT_RETENTION",
    "MAX_ANALYSIS_CHARS",
    "MAX_PROFILE_BYTES",
    "OPEN_STATES",
    "ActionQuery",
    "AlertQuery",
    "AlertRow",
    "AlertStates",
    "AuditQuery",
    "ChainCheck",
    "Checkpoint",
    "CurrentState",
    "DiskCap",
    "Forecasts",
    "Head",
    "Kept",
    "LabelMatch",
    "LogHit",
    "Page",
    "Position",
    "ProfileInfo",
    "Pruned",
    "Retention",
    "RunSummary",
    "SeriesInfo",
    "Space",
    "Store",
    "StoreError",
    "StoredAnalysis",
    "StoredForecast",
    "StoredLaw",
    "TokenRecord",
    "every",
]
