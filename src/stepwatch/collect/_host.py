"""Host metrics through psutil: CPU, memory, network, disk, and the training processes.

Rates are computed here from counters and the injected monotonic clock, never
with psutil's own ``cpu_percent``, whose module-wide last-call state any other
caller in the process would disturb. A rate needs two reads, so it is absent on
the first one and on any read where a counter went backwards (reset or wrap).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from os import PathLike, fspath
from typing import Any, TypeVar

import psutil

from ..model import Event
from ._pods import Pods
from ._source import Reading, Sample

__all__ = ["HostSource", "busy_percent", "counter_rate"]

K = TypeVar("K", bound=Hashable)

#: Network interfaces left out of the traffic rates: loopback is local, not the node's I/O.
LOOPBACK = frozenset({"lo", "lo0"})


def counter_rate(before: Mapping[K, float], now: Mapping[K, float], dt: float) -> float | None:
    """Summed per-second increase of the counters present in both reads.

    None when there is nothing to compare or when any counter went backwards: a
    reset or wrap makes that read's rate unknowable, not zero.
    """
    if not dt > 0:
        return None
    total, seen = 0.0, False
    for key, value in now.items():
        prev = before.get(key)
        if prev is None:
            continue
        delta = value - prev
        if not delta >= 0:  # also refuses NaN
            return None
        total, seen = total + delta, True
    return total / dt if seen else None


#: Seconds below a clock tick: what subtracting large float counters may be off by.
_ROUNDING_S = 1e-6


def busy_percent(
    before: Mapping[K, tuple[float, float]], now: Mapping[K, tuple[float, float]]
) -> tuple[float, float] | None:
    """Whole-machine and busiest-core busy % from per-core ``(busy, total)`` second counters."""
    busy_sum = total_sum = 0.0
    core_max: float | None = None
    for core, (busy, total) in now.items():
        prev = before.get(core)
        if prev is None:
            continue
        d_busy = busy - prev[0]
        if d_busy < -_ROUNDING_S:
            return None
        d_busy = max(d_busy, 0.0)  # busy is total less idle: float rounding, not a reset
        # A core's idle and iowait may run back a tick (the kernel estimates them while the
        # core sleeps): its busy time is still right, its total is at least that.
        d_total = max(total - prev[1], d_busy)
        if d_total == 0:
            continue
        busy_sum, total_sum = busy_sum + d_busy, total_sum + d_total
        core_max = max(core_max or 0.0, _clamp_pct(100.0 * d_busy / d_total))
    if core_max is None:
        return None
    return _clamp_pct(100.0 * busy_sum / total_sum), core_max


def _clamp_pct(value: float) -> float:
    return min(100.0, max(0.0, value))


@dataclass(slots=True)
class _Watch:
    """One watched process; ``proc`` is resolved on the first read after it was added."""

    pid: int
    root: int
    returncode: Callable[[], int | None] | None = None
    report_exit: bool = True
    proc: Any = None
    cpu_before: tuple[float, float] | None = None  # (monotonic t, cpu seconds)
    pod: dict[str, str] | None = None  # its pod's labels, once looked up


class HostSource:
    """Reads the node's CPU, memory, network, disk and watched processes (see ANOMALIES.md).

    Args:
        psutil_module: the psutil module, or a fake with the same functions.
        interval_s: seconds between reads.
        paths: directories whose free space is reported (checkpoint and data paths).
        pids: processes to watch from the start, with their descendants.
        clock: monotonic seconds, for rates.
        children_every_s: how often the descendants of watched roots are looked up again
            (the only read that walks every process on the node).
        pods: finds the Kubernetes pod, namespace and container of a watched process, whose
            samples carry them as labels.
    """

    name = "host"

    def __init__(
        self,
        psutil_module: Any = psutil,
        *,
        interval_s: float = 1.0,
        paths: Iterable[str | PathLike[str]] = (),
        pids: Iterable[int] = (),
        clock: Callable[[], float] = time.monotonic,
        children_every_s: float = 5.0,
        pods: Pods | None = None,
    ) -> None:
        self._ps = psutil_module
        self._pods = pods or Pods()
        self.interval_s = interval_s
        self.paths = [fspath(p) for p in paths]
        self._clock = clock
        self._children_every_s = children_every_s
        self._errors = (psutil_module.Error, OSError, RuntimeError)
        self._lock = threading.Lock()
        self._roots: dict[int, bool] = {}
        self._watches: dict[int, _Watch] = {}
        self._next_refresh = -math.inf
        self._failing: set[str] = set()
        self._cpu_before: dict[int, tuple[float, float]] = {}
        self._io_before: dict[str, tuple[float, dict[str, float]]] = {}
        for pid in pids:
            self.watch_pid(pid)

    def watch_pid(
        self,
        pid: int,
        *,
        children: bool = True,
        returncode: Callable[[], int | None] | None = None,
        report_exit: bool = True,
    ) -> None:
        """Watch ``pid`` (and, with ``children``, its descendants) from the next read on.

        ``returncode`` (e.g. ``Popen.poll``) gives the exit code when the process ends; without
        it the exit event says the code is unknown (psutil cannot tell for another's child).
        ``report_exit=False`` leaves the event for ``pid``'s own end to the caller, who knows
        more (its parent: the signal, the status of the run).
        """
        with self._lock:
            self._roots[pid] = children
            self._watches[pid] = _Watch(pid, pid, returncode, report_exit)
            self._next_refresh = -math.inf

    def unwatch_pid(self, pid: int) -> None:
        """Stop watching a root and the descendants found under it; no event is given."""
        with self._lock:
            self._roots.pop(pid, None)
            for watch in [w for w in self._watches.values() if w.root == pid]:
                del self._watches[watch.pid]

    @property
    def watched(self) -> list[int]:
        """The pids read now: roots and the descendants found so far."""
        with self._lock:
            return sorted(self._watches)

    def read(self, now: float) -> Reading:
        t = self._clock()
        out = Reading()
        self._guarded("cpu", now, out, self._read_cpu, out)
        self._guarded("memory", now, out, self._read_memory, out)
        self._guarded("network", now, out, self._read_network, t, out)
        self._guarded("disk I/O", now, out, self._read_disk_io, t, out)
        for path in self.paths:
            self._guarded(f"disk space of {path}", now, out, self._read_free, path, out)
        self._read_processes(t, now, out)
        return out

    def close(self) -> None:
        """Nothing to release: psutil keeps no handles open between reads."""

    def _guarded(
        self, what: str, now: float, out: Reading, read: Callable[..., None], *args: Any
    ) -> None:
        """Run one part of a read; a failure is one event per streak and absent values."""
        try:
            read(*args)
        except self._errors as exc:
            self._fail(what, f"{what} unavailable: {type(exc).__name__}: {exc}", now, out)
        else:
            self._failing.discard(what)

    def _fail(self, what: str, text: str, now: float, out: Reading) -> None:
        if what not in self._failing:
            self._failing.add(what)
            out.events.append(Event(now, "host_error", text, {}, {"what": what}))

    def _read_cpu(self, out: Reading) -> None:
        cores = {}
        for core, times in enumerate(self._ps.cpu_times(percpu=True)):
            guest = getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
            total = sum(times) - guest  # guest time is already counted in user and nice
            cores[core] = (total - times.idle - getattr(times, "iowait", 0.0), total)
        before, self._cpu_before = self._cpu_before, cores
        pct = busy_percent(before, cores)
        if pct is not None:
            out.samples.append(Sample("host.cpu_pct", pct[0]))
            out.samples.append(Sample("host.cpu_core_max_pct", pct[1]))

    def _read_memory(self, out: Reading) -> None:
        mem = self._ps.virtual_memory()
        # total - available, as node_exporter users compute it: what an OOM would run out of.
        out.samples.append(Sample("host.mem_used_bytes", float(mem.total - mem.available)))
        out.samples.append(Sample("host.mem_total_bytes", float(mem.total)))

    def _read_network(self, t: float, out: Reading) -> None:
        nics = {k: v for k, v in self._ps.net_io_counters(pernic=True).items() if k not in LOOPBACK}
        rx = {nic: float(c.bytes_recv) for nic, c in nics.items()}
        tx = {nic: float(c.bytes_sent) for nic, c in nics.items()}
        self._rate("host.net_rx_bytes_per_s", rx, t, out)
        self._rate("host.net_tx_bytes_per_s", tx, t, out)

    def _read_disk_io(self, t: float, out: Reading) -> None:
        counters = self._ps.disk_io_counters(perdisk=False)
        if counters is None:
            raise RuntimeError("no disk I/O counters on this system")
        self._rate("host.disk_write_bytes_per_s", {"all": float(counters.write_bytes)}, t, out)

    def _rate(self, name: str, counters: dict[str, float], t: float, out: Reading) -> None:
        before = self._io_before.get(name)
        self._io_before[name] = (t, counters)
        if before is not None:
            rate = counter_rate(before[1], counters, t - before[0])
            if rate is not None:
                out.samples.append(Sample(name, rate))

    def _read_free(self, path: str, out: Reading) -> None:
        free = self._ps.disk_usage(path).free
        out.samples.append(Sample("host.disk_free_bytes", float(free), {"path": path}))

    def _read_processes(self, t: float, now: float, out: Reading) -> None:
        with self._lock:
            for watch in [w for w in self._watches.values() if w.proc is None]:
                self._resolve(watch, now, out)
            if t >= self._next_refresh:
                self._refresh_children()
                self._next_refresh = t + self._children_every_s
            for watch in list(self._watches.values()):
                self._read_process(watch, t, now, out)

    def _resolve(self, watch: _Watch, now: float, out: Reading) -> None:
        """Find a newly watched pid; one already gone gives its exit event straight away."""
        try:
            watch.proc = self._ps.Process(watch.pid)
        except self._ps.NoSuchProcess:
            self._exited(watch, now, out)
        except self._errors as exc:
            self._fail(f"process {watch.pid}", f"process {watch.pid} unreadable: {exc!r}", now, out)

    def _refresh_children(self) -> None:
        """Add descendants of the roots that want them (torchrun's workers, dataloaders)."""
        for root, children in self._roots.items():
            watch = self._watches.get(root)
            if not children or watch is None or watch.proc is None:
                continue
            try:
                found = watch.proc.children(recursive=True)
            except self._errors:
                continue  # the root's own read reports it
            for child in found:
                if child.pid not in self._watches:
                    self._watches[child.pid] = _Watch(child.pid, root, proc=child)

    def _read_process(self, watch: _Watch, t: float, now: float, out: Reading) -> None:
        ps, proc = self._ps, watch.proc
        if proc is None:
            return
        try:
            with proc.oneshot():
                if not proc.is_running() or proc.status() == ps.STATUS_ZOMBIE:
                    raise ps.NoSuchProcess(watch.pid)
                rss = proc.memory_info().rss
                times = proc.cpu_times()
        except ps.NoSuchProcess:
            self._exited(watch, now, out)
            return
        except self._errors as exc:
            self._fail(f"process {watch.pid}", f"process {watch.pid} unreadable: {exc!r}", now, out)
            return
        self._failing.discard(f"process {watch.pid}")
        if watch.pod is None:
            watch.pod = self._pods.of(watch.pid)
        labels = {"pid": str(watch.pid), **watch.pod}
        out.samples.append(Sample("host.proc_rss_bytes", float(rss), labels))
        cpu = float(times.user + times.system)
        before, watch.cpu_before = watch.cpu_before, (t, cpu)
        if before is not None and t > before[0] and cpu >= before[1]:
            pct = 100.0 * (cpu - before[1]) / (t - before[0])
            out.samples.append(Sample("host.proc_cpu_pct", pct, dict(labels)))

    def _exited(self, watch: _Watch, now: float, out: Reading) -> None:
        """One event for a process that ended, then forget it."""
        del self._watches[watch.pid]
        self._roots.pop(watch.pid, None)
        self._failing.discard(f"process {watch.pid}")
        if not watch.report_exit:
            return
        code = watch.returncode() if watch.returncode is not None else None
        text = f"process {watch.pid} exited" + (f" with code {code}" if code is not None else "")
        data = {"pid": watch.pid, "exit": code, "root": watch.root}
        out.events.append(Event(now, "process_exit", text, {"pid": str(watch.pid)}, data))
