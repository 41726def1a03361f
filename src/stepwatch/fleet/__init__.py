"""Several collectors as one fleet behind a RabbitMQ broker: the streams batches wait in, who
reads which partition, and reading it into this collector (``stepwatch server --broker``)."""

from ._assign import owned_by, owner
from ._deliver import LocalCollector
from ._intake import BrokerIntake
from ._key import FleetKey
from ._layout import DEFAULT_PARTITIONS, BrokerLayout, LayoutError
from ._ledger import Ledger
from ._members import Member
from ._partition import Outcome

__all__ = [
    "DEFAULT_PARTITIONS",
    "BrokerIntake",
    "BrokerLayout",
    "FleetKey",
    "LayoutError",
    "Ledger",
    "LocalCollector",
    "Member",
    "Outcome",
    "owned_by",
    "owner",
]
