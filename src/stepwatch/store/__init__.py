"""The embedded time-series store: one DuckDB file, written by the collector, queried by the API."""

from ._catalogue import LabelMatch, SeriesInfo
from ._errors import StoreError
from ._plan import Kept
from ._prune import Pruned
from ._records import ChainCheck, Head
from ._retention import DEFAULT_RETENTION, Retention
from ._space import DiskCap, Space
from ._store import Store
from ._tokens import TokenRecord

__all__ = [
    "DEFAULT_RETENTION",
    "ChainCheck",
    "DiskCap",
    "Head",
    "Kept",
    "LabelMatch",
    "Pruned",
    "Retention",
    "SeriesInfo",
    "Space",
    "Store",
    "StoreError",
    "TokenRecord",
]
