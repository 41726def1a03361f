"""Every setting of a collector in one object: the command line fills it, and ``serve``,
``ServerThread`` and ``create_app`` read it, so each option and its default is spelled once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._durable import DEFAULT_CHECKPOINT_INTERVAL_S
from .._links import DEFAULT_PORT
from ..store import DEFAULT_RETENTION, DiskCap, Retention
from ._auth import is_loopback
from ._forecasting import DEFAULT_FORECAST_INTERVAL_S
from ._guards import DEFAULT_MAX_JSON_BYTES, HostAllowList

if TYPE_CHECKING:
    from .._encryption import EncryptionKey
    from .._tls import ServerTls
    from ..act import AnalystConfig
    from ..fleet import BrokerLayout, FleetKey

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_OPTIONS",
    "DEFAULT_STORE_MEMORY_BYTES",
    "CollectorOptions",
]

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024

_MIN_STORE_MEMORY_BYTES = 32 << 20

#: DuckDB's memory for the store: its block cache stops here rather than at 80 % of RAM.
DEFAULT_STORE_MEMORY_BYTES = 1 << 30


@dataclass(frozen=True, slots=True)
class CollectorOptions:
    """How a collector listens, what it loads and the limits it keeps (`stepwatch server`).

    Attributes:
        host, port: where to listen; port 0 picks a free port.
        auth: require tokens on every route but the probes and the page shell (None: on
            whenever ``host`` is not a loopback address).
        allowed_hosts: names the collector is reached by, besides its bind address and
            localhost (a request under another Host name is refused: DNS rebinding).
        rules: rule files added to the built-in pack; re-read when they change.
        notify: the notifications file: receivers, and routes of alerts to them.
        playbooks: the playbooks file: the remediations alerts and people may run.
        key: the store is an encrypted database under this key (None: a plain file).
        tls: serve HTTPS with this certificate (and, with a client CA, mutual TLS).
        max_body_bytes: ingest bodies above this are refused with 413.
        max_json_bytes: every other request body above this is refused with 413.
        max_queued_rows: samples and events waiting for the store before ingest answers 503.
        compact_interval_s: how often the writer compacts the store while data arrives.
        lateness_s: data time the rules comparing members wait for late samples.
        checkpoint_interval_s: seconds between checkpoints of the collector's state.
        metrics_public: /metrics answers without a token (its figures name no run nor project).
        retention: how long raw samples, each rollup tier and ingested events are kept.
        disk_cap: how large the store may grow (None: what its file system has room for).
        upkeep_interval_s: how often retention runs and the store's size is measured.
        store_memory_bytes: what the store's database may hold in memory (its cache of the
            file, indexes, rows not yet checkpointed, query work); queries spill beyond it.
        forecast_interval_s: how often running runs that logged new steps are forecast again
            for the runs list (0: never; their ETA is then the naive one).
        remote_write: Prometheus remote-write receivers every committed sample is forwarded to.
        influx_write: InfluxDB write endpoints every committed sample is forwarded to.
        broker: read this collector's share of a broker's partitions (None: HTTP only).
        collector_id: this collector's name in its fleet (default: host name and port).
        advertise_url: where the other collectors of the fleet reach this one's API
            (default: the URL it listens on).
        fleet_key: the fleet's shared secret: tokens made on one collector open every one,
            and a request passed to the collector that holds its run keeps its caller.
        analyst: the model incidents are sent to for an analysis (None: none is made).
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    auth: bool | None = None
    allowed_hosts: tuple[str, ...] = ()
    rules: tuple[Path, ...] = ()
    notify: Path | None = None
    playbooks: Path | None = None
    key: EncryptionKey | None = None
    tls: ServerTls | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_json_bytes: int = DEFAULT_MAX_JSON_BYTES
    max_queued_rows: int = 4_000_000
    compact_interval_s: float = 2.0
    lateness_s: float = 2.0
    checkpoint_interval_s: float = DEFAULT_CHECKPOINT_INTERVAL_S
    metrics_public: bool = False
    retention: Retention = DEFAULT_RETENTION
    disk_cap: DiskCap | None = None
    upkeep_interval_s: float = 10.0
    store_memory_bytes: int = DEFAULT_STORE_MEMORY_BYTES
    forecast_interval_s: float = DEFAULT_FORECAST_INTERVAL_S
    remote_write: tuple[str, ...] = ()
    influx_write: tuple[str, ...] = ()
    broker: BrokerLayout | None = None
    collector_id: str | None = None
    advertise_url: str | None = None
    fleet_key: FleetKey | None = None
    analyst: AnalystConfig | None = None

    def __post_init__(self) -> None:
        """A wrong value fails here, before anything opens."""
        if not self.checkpoint_interval_s > 0:
            raise ValueError(
                f"the checkpoint interval must be above 0 s: {self.checkpoint_interval_s}"
            )
        if not self.upkeep_interval_s > 0:
            raise ValueError(f"the upkeep interval must be above 0 s: {self.upkeep_interval_s}")
        if not self.forecast_interval_s >= 0:
            raise ValueError(
                f"the forecast interval must be 0 (off) or above: {self.forecast_interval_s}"
            )
        if self.store_memory_bytes < _MIN_STORE_MEMORY_BYTES:
            raise ValueError(
                f"the store needs at least {_MIN_STORE_MEMORY_BYTES >> 20} MiB of memory: "
                f"{self.store_memory_bytes} bytes"
            )
        self.hosts()  # a wrong allowed host name too
        if self.broker is not None and self.tls is not None:
            raise ValueError(
                "--broker with --tls-cert is not supported: the broker intake hands batches to "
                "the collector over plain HTTP on its own address"
            )
        if self.broker is not None and self.requires_auth and self.fleet_key is None:
            raise ValueError(
                "--broker with tokens needs --fleet-key-file: the same key on every collector "
                "of the fleet makes their tokens one set (`openssl rand -hex 32 > fleet.key`)"
            )

    @property
    def requires_auth(self) -> bool:
        """Tokens are required: asked for, or by default off a loopback address."""
        return not is_loopback(self.host) if self.auth is None else self.auth

    def hosts(self) -> HostAllowList:
        """The Host names requests may carry."""
        return HostAllowList.of(self.host, self.allowed_hosts)


#: Every option at its default (frozen: safe to share).
DEFAULT_OPTIONS = CollectorOptions()
