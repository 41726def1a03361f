"""The embedded time-series store: one DuckDB file, written by the collector, queried by the API."""

from ._catalogue import LabelMatch, SeriesInfo
from ._checkpoints import Checkpoint, Position
from ._errors import StoreError
from ._records import ChainCheck, Head
from ._store import Store
from ._tokens import TokenRecord

__all__ = [
    "ChainCheck",
    "Checkpoint",
    "Head",
    "LabelMatch",
    "Position",
    "SeriesInfo",
    "Store",
    "StoreError",
    "TokenRecord",
]
