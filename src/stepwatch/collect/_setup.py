"""Building an agent from its options: which sources, which labels, where it spools and ships.

Shared by ``stepwatch agent`` (a node daemon) and ``stepwatch run`` (an agent
beside one wrapped command), so both read the same sources the same way.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from .._encryption import EncryptionKey
from ..model import Run as RunRecord
from ..sdk import Pipeline
from ..spool import NODE_SPOOL, ClientTls, Sealer, spool_cap
from ._agent import Agent
from ._gpu import open_gpu
from ._host import HostSource
from ._log_metrics import LOG_FORMATS
from ._pod_resources import KUBELET_SOCKET, PodResources
from ._scrape import ScrapeSource
from ._source import Source
from ._tail import LogTail

__all__ = ["AgentOptions", "default_spool_root", "open_agent"]

#: How often a running agent looks for spools whose writer is gone (a trainer killed since).
ORPHANS_RESCAN_S = 60.0


def default_spool_root() -> Path:
    """Where producers spool unless told otherwise (the SDK's default too)."""
    return Path.home() / ".stepwatch" / "spool"


@dataclass(slots=True)
class AgentOptions:
    """What an agent reads and where it sends it (the ``stepwatch agent`` options)."""

    node: str = field(default_factory=socket.gethostname)
    run_id: str | None = None
    server: str | None = None
    #: A broker (``amqp://``) the batches go to instead of ``server``.
    transport: str | None = None
    token: str | None = None
    tls: ClientTls = field(default_factory=ClientTls)
    spool_root: Path = field(default_factory=default_spool_root)
    interval_s: float = 1.0
    gpu: str = "auto"
    gpu_script: Path | None = None
    #: The kubelet's pod-resources socket, which says which pod each GPU is allocated to;
    #: None: the GPUs' pods are found from their processes' cgroups alone.
    pod_resources: Path | None = KUBELET_SOCKET
    scrape: Sequence[str] = ()
    scrape_interval_s: float = 15.0
    logs: Sequence[Path] = ()
    #: A format of ``LOG_FORMATS`` in which the ``logs`` (and, under ``stepwatch run``, the
    #: command's output) print training metrics; None: their lines are only log events.
    parse: str | None = None
    paths: Sequence[Path] = ()
    pids: Sequence[int] = ()
    heartbeat_s: float = 5.0
    #: Seals the agent's spool (and, under `stepwatch run`, encrypts the collector's store).
    encryption_key: EncryptionKey | None = None
    #: Cap of the agent's spool in bytes (0: none; None: the default, see ``spool_cap``).
    max_spool_bytes: int | None = None
    #: Ship spools under ``spool_root`` whose writer is gone (killed trainers) to ``server``.
    ship_orphans: bool = True

    def check_targets(self) -> None:
        """ValueError for a target given by mistake: a pid no process has, a log file in a
        directory that does not exist, a format to parse that is none. A log file not there yet
        is fine (it is waited for)."""
        if self.parse is not None and self.parse not in LOG_FORMATS:
            raise ValueError(f"--parse {self.parse}: use one of {', '.join(LOG_FORMATS)}")
        for pid in self.pids:
            if not psutil.pid_exists(pid):
                raise ValueError(f"--pid {pid}: no such process")
        for path in self.logs:
            if path.is_dir():
                raise ValueError(f"--log {path}: a directory, not a log file")
            if not path.parent.is_dir():
                raise ValueError(f"--log {path}: no directory {path.parent} to watch it in")


def build_sources(options: AgentOptions, say: Callable[[str], object]) -> list[Source]:
    """The sources ``options`` ask for; a missing GPU is said, never replaced by a fake."""
    host = HostSource(interval_s=options.interval_s, paths=options.paths)
    for pid in options.pids:
        host.watch_pid(pid, children=True)
    sources: list[Source] = [host]
    allocations = PodResources(options.pod_resources) if options.pod_resources else None
    gpu, reason = open_gpu(
        options.gpu, options.gpu_script, interval_s=options.interval_s, pod_resources=allocations
    )
    if gpu is not None:
        sources.append(gpu)
    if reason:
        say(reason)
    if options.scrape:
        sources += [
            ScrapeSource(url, interval_s=options.scrape_interval_s) for url in options.scrape
        ]
    sources += [
        LogTail(path, interval_s=options.interval_s, parse=options.parse) for path in options.logs
    ]
    return sources


def open_agent(
    options: AgentOptions, run: RunRecord | None = None, say: Callable[[str], object] = print
) -> Agent:
    """An agent (not yet started) for ``options``.

    Args:
        run: the run this agent's owner creates on the collector and finishes
            (``stepwatch run``); a plain agent attached with ``run_id`` only labels
            its series and leaves the run record to the training processes.
    """
    labels = {"node": options.node}
    if options.run_id:
        labels["run"] = options.run_id
    source = f"agent-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    spool_dir = options.spool_root / (options.run_id or NODE_SPOOL) / source
    sources = build_sources(options, say)
    pipeline = Pipeline(
        spool_dir,
        source,
        labels,
        server=options.server,
        transport=options.transport,
        token=options.token,
        tls=options.tls,
        run=None if run is None else (lambda: run),
        max_spool_bytes=spool_cap(options.max_spool_bytes, options.spool_root),
        heartbeat_s=options.heartbeat_s,
        sealer=Sealer(options.encryption_key) if options.encryption_key else None,
        orphans=options.spool_root if options.ship_orphans else None,
        orphans_rescan_s=ORPHANS_RESCAN_S,
    )
    return Agent(sources, pipeline, labels)
