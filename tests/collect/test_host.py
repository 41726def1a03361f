"""HostSource's maths and failure handling against a scripted stand-in for psutil."""

from __future__ import annotations

import contextlib
from collections import namedtuple
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from stepwatch.collect._host import HostSource, busy_percent, counter_rate
from stepwatch.collect._source import Reading

CpuTimes = namedtuple("CpuTimes", "user nice system idle iowait irq softirq steal guest guest_nice")
Memory = namedtuple("Memory", "total available percent")
NicIO = namedtuple("NicIO", "bytes_sent bytes_recv")
DiskIO = namedtuple("DiskIO", "read_bytes write_bytes")
Usage = namedtuple("Usage", "total used free")
ProcCpu = namedtuple("ProcCpu", "user system children_user children_system")
ProcMem = namedtuple("ProcMem", "rss vms")


class Error(Exception):
    pass


class NoSuchProcess(Error):
    pass


class AccessDenied(Error):
    pass


def cpu(user: float = 0, system: float = 0, idle: float = 0, **more: float) -> CpuTimes:
    fields = dict.fromkeys(CpuTimes._fields, 0.0)
    fields.update(user=user, system=system, idle=idle, **more)
    return CpuTimes(**fields)


@dataclass
class FakeProcess:
    """A process psutil would show; ``gone`` once it has been reaped."""

    host: FakePsutil
    pid: int
    rss: int = 100 << 20
    cpu_s: float = 0.0
    status_: str = "running"
    gone: bool = False
    denied: bool = False
    kids: list[int] = field(default_factory=list)

    def oneshot(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    def is_running(self) -> bool:
        return not self.gone

    def status(self) -> str:
        self._check()
        return self.status_

    def memory_info(self) -> ProcMem:
        self._check()
        return ProcMem(self.rss, self.rss * 2)

    def cpu_times(self) -> ProcCpu:
        self._check()
        return ProcCpu(self.cpu_s * 0.75, self.cpu_s * 0.25, 0.0, 0.0)

    def children(self, recursive: bool = False) -> list[FakeProcess]:
        self._check()
        found = [self.host.procs[k] for k in self.kids]
        if recursive:
            found += [g for kid in list(found) for g in kid.children(recursive=True)]
        return found

    def _check(self) -> None:
        if self.gone:
            raise NoSuchProcess(self.pid)
        if self.denied:
            raise AccessDenied(self.pid)


class FakePsutil:
    """The part of the psutil module HostSource uses, with values a test sets."""

    Error = Error
    NoSuchProcess = NoSuchProcess
    AccessDenied = AccessDenied
    STATUS_ZOMBIE = "zombie"

    def __init__(self) -> None:
        self.cores = [cpu(100, 20, 880), cpu(50, 10, 940)]
        self.memory = Memory(64 << 30, 48 << 30, 25.0)
        self.nics = {"lo": NicIO(10**9, 10**9), "eth0": NicIO(5000, 70000), "ib0": NicIO(0, 0)}
        self.disk: DiskIO | None = DiskIO(0, 10**6)
        self.free = {"/ckpt": 7 << 40}
        self.procs: dict[int, FakeProcess] = {}
        self.broken: dict[str, Exception] = {}
        self.walks = 0

    def spawn(self, pid: int, parent: int | None = None, **kw: object) -> FakeProcess:
        proc = self.procs[pid] = FakeProcess(self, pid, **kw)  # type: ignore[arg-type]
        if parent is not None:
            self.procs[parent].kids.append(pid)
        return proc

    def _fail(self, what: str) -> None:
        if what in self.broken:
            raise self.broken[what]

    def cpu_times(self, percpu: bool = False) -> list[CpuTimes]:
        assert percpu
        self._fail("cpu")
        return list(self.cores)

    def virtual_memory(self) -> Memory:
        return self.memory

    def net_io_counters(self, pernic: bool = False) -> dict[str, NicIO]:
        assert pernic
        self._fail("net")
        return dict(self.nics)

    def disk_io_counters(self, perdisk: bool = False) -> DiskIO | None:
        self._fail("disk")
        return self.disk

    def disk_usage(self, path: str) -> Usage:
        if path not in self.free:
            raise FileNotFoundError(2, "No such file or directory", path)
        return Usage(10 << 40, (10 << 40) - self.free[path], self.free[path])

    def Process(self, pid: int) -> FakeProcess:  # noqa: N802 - psutil's name
        proc = self.procs.get(pid)
        if proc is None or proc.gone:
            raise NoSuchProcess(pid)
        return proc


class Clock:
    def __init__(self) -> None:
        self.t = 50.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def ps() -> FakePsutil:
    return FakePsutil()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def host(ps: FakePsutil, clock: Clock) -> Iterator[HostSource]:
    source = HostSource(ps, paths=["/ckpt"], clock=clock)
    yield source
    source.close()


def values(reading: Reading) -> dict[str, float]:
    """Unlabelled samples by name, labelled ones as 'name{value}'."""
    return {
        s.name + "".join(f"{{{v}}}" for v in s.labels.values()): s.value for s in reading.samples
    }


def test_first_read_has_levels_but_no_rates(host: HostSource) -> None:
    got = values(host.read(1.0))
    assert got == {
        "host.mem_used_bytes": 16 << 30,
        "host.mem_total_bytes": 64 << 30,
        "host.disk_free_bytes{/ckpt}": 7 << 40,
    }


def test_rates_over_the_injected_clock(host: HostSource, ps: FakePsutil, clock: Clock) -> None:
    host.read(1.0)
    clock.t += 2.0
    ps.cores = [cpu(130, 30, 940), cpu(50, 10, 1040)]  # core 0: 40 of 100 busy; core 1 idle
    ps.nics = {"lo": NicIO(10**10, 10**10), "eth0": NicIO(9000, 90000), "ib0": NicIO(1000, 6000)}
    ps.disk = DiskIO(555, 10**6 + 8000)
    got = values(host.read(3.0))
    assert got["host.cpu_pct"] == pytest.approx(100 * 40 / 200)
    assert got["host.cpu_core_max_pct"] == pytest.approx(40.0)
    assert got["host.net_rx_bytes_per_s"] == pytest.approx((20000 + 6000) / 2)  # lo left out
    assert got["host.net_tx_bytes_per_s"] == pytest.approx((4000 + 1000) / 2)
    assert got["host.disk_write_bytes_per_s"] == pytest.approx(4000.0)


def test_guest_time_is_not_counted_twice(host: HostSource, ps: FakePsutil) -> None:
    host.read(1.0)
    # Linux counts guest time inside user time: 10 s user (all of it guest) + 10 s idle
    ps.cores = [cpu(110, 20, 890, guest=10), cpu(50, 10, 960)]
    assert values(host.read(2.0))["host.cpu_core_max_pct"] == pytest.approx(50.0)


def test_a_counter_going_backwards_gives_no_rate_for_that_read(
    host: HostSource, ps: FakePsutil, clock: Clock
) -> None:
    host.read(1.0)
    clock.t += 1.0
    ps.nics = {**ps.nics, "eth0": NicIO(6000, 10)}  # rx reset (driver reload)
    ps.disk = DiskIO(0, 5)
    ps.cores = [cpu(10, 2, 100), ps.cores[1]]
    got = values(host.read(2.0))
    for name in ("host.net_rx_bytes_per_s", "host.disk_write_bytes_per_s", "host.cpu_pct"):
        assert name not in got
    assert got["host.net_tx_bytes_per_s"] == pytest.approx(1000.0)
    clock.t += 1.0
    ps.nics = {**ps.nics, "eth0": NicIO(6000, 510)}
    assert values(host.read(3.0))["host.net_rx_bytes_per_s"] == pytest.approx(500.0)


def test_unavailable_parts_give_one_event_per_streak(host: HostSource, ps: FakePsutil) -> None:
    ps.disk = None  # a container without /proc/diskstats
    ps.broken["cpu"] = AccessDenied("cpu")
    ps.free = {}
    first, second = host.read(1.0), host.read(2.0)
    assert sorted(e.data["what"] for e in first.events) == [
        "cpu",
        "disk I/O",
        "disk space of /ckpt",
    ]
    assert all(e.kind == "host_error" and e.ts == 1.0 for e in first.events)
    assert not second.events
    assert "host.mem_used_bytes" in values(second)
    ps.disk = DiskIO(0, 0)
    assert not host.read(3.0).events
    ps.disk = None
    assert [e.data["what"] for e in host.read(4.0).events] == ["disk I/O"]


def test_an_oserror_from_a_read_is_an_event_too(host: HostSource, ps: FakePsutil) -> None:
    ps.broken["net"] = PermissionError(13, "Permission denied", "/proc/net/dev")
    (event,) = host.read(1.0).events
    assert event.data["what"] == "network" and "Permission denied" in event.text


def test_watched_processes_rss_and_cpu(host: HostSource, ps: FakePsutil, clock: Clock) -> None:
    root = ps.spawn(10, rss=2 << 30)
    worker = ps.spawn(11, parent=10, rss=30 << 30)
    ps.spawn(12, parent=11, rss=1 << 30)  # a dataloader worker of the worker
    ps.spawn(99)  # not ours
    host.watch_pid(10)
    got = values(host.read(1.0))
    assert {k: v for k, v in got.items() if "proc_" in k} == {
        "host.proc_rss_bytes{10}": 2 << 30,
        "host.proc_rss_bytes{11}": 30 << 30,
        "host.proc_rss_bytes{12}": 1 << 30,
    }
    clock.t += 4.0
    root.cpu_s, worker.cpu_s = 1.0, 12.0
    got = values(host.read(2.0))
    assert got["host.proc_cpu_pct{10}"] == pytest.approx(25.0)
    assert got["host.proc_cpu_pct{11}"] == pytest.approx(300.0)
    assert got["host.proc_cpu_pct{12}"] == 0.0
    assert host.watched == [10, 11, 12]


def test_an_exit_is_one_event_then_forgotten(host: HostSource, ps: FakePsutil) -> None:
    ps.spawn(10)
    ps.spawn(11, parent=10)
    host.watch_pid(10, returncode=lambda: 3)
    host.read(1.0)
    ps.procs[11].gone = True
    ps.procs[10].status_ = "zombie"  # exited, its parent has not reaped it yet
    exits = host.read(2.0).events
    assert sorted((e.kind, e.labels["pid"], e.data["exit"]) for e in exits) == [
        ("process_exit", "10", 3),
        ("process_exit", "11", None),  # a descendant's code is its parent's to collect
    ]
    assert not host.read(3.0).events and host.watched == []


def test_the_exit_code_comes_from_the_owner(host: HostSource, ps: FakePsutil) -> None:
    ps.spawn(10)
    host.watch_pid(10, children=False, returncode=lambda: -9)
    host.read(1.0)
    ps.procs[10].gone = True
    (event,) = host.read(2.0).events
    assert event.data == {"pid": 10, "exit": -9, "root": 10}
    assert "code -9" in event.text and event.ts == 2.0


def test_a_pid_already_gone_exits_at_the_first_read(host: HostSource) -> None:
    host.watch_pid(4242)
    reading = host.read(1.0)
    assert [(e.kind, e.data["pid"]) for e in reading.events] == [("process_exit", 4242)]
    assert not [s for s in reading.samples if s.name.startswith("host.proc_")]


def test_access_denied_is_one_event_and_no_values(host: HostSource, ps: FakePsutil) -> None:
    ps.spawn(10, denied=True)
    host.watch_pid(10)
    first, second = host.read(1.0), host.read(2.0)
    assert [e.kind for e in first.events] == ["host_error"] and not second.events
    assert not [s for s in first.samples + second.samples if s.name.startswith("host.proc_")]
    assert host.watched == [10], "still watched: it may become readable"


def test_descendants_are_looked_up_on_their_own_schedule(ps: FakePsutil, clock: Clock) -> None:
    host = HostSource(ps, clock=clock, children_every_s=5.0)
    ps.spawn(10)
    host.watch_pid(10)
    host.read(1.0)
    ps.spawn(11, parent=10)
    clock.t += 1.0
    host.read(2.0)
    assert host.watched == [10], "found at the next lookup, not at every read"
    clock.t += 4.0
    host.read(3.0)
    assert host.watched == [10, 11]


def test_children_false_watches_only_the_pid(host: HostSource, ps: FakePsutil) -> None:
    ps.spawn(10)
    ps.spawn(11, parent=10)
    host.watch_pid(10, children=False)
    host.read(1.0)
    assert host.watched == [10]


def test_unwatch_drops_the_root_and_its_descendants(host: HostSource, ps: FakePsutil) -> None:
    ps.spawn(10)
    ps.spawn(11, parent=10)
    ps.spawn(20)
    host.watch_pid(10)
    host.watch_pid(20)
    host.read(1.0)
    host.unwatch_pid(10)
    ps.procs[11].gone = True
    assert not host.read(2.0).events
    assert host.watched == [20]


def test_pids_given_at_construction_are_watched(ps: FakePsutil, clock: Clock) -> None:
    ps.spawn(7, rss=123)
    host = HostSource(ps, pids=[7], clock=clock)
    assert values(host.read(1.0))["host.proc_rss_bytes{7}"] == 123


@pytest.mark.parametrize(
    ("before", "now", "dt", "expected"),
    [
        ({"a": 1.0}, {"a": 11.0}, 2.0, 5.0),
        ({"a": 1.0, "b": 0.0}, {"a": 11.0, "b": 10.0, "new": 99.0}, 2.0, 10.0),
        ({}, {"a": 1.0}, 1.0, None),
        ({"a": 5.0}, {"a": 4.0}, 1.0, None),
        ({"a": 5.0}, {"a": float("nan")}, 1.0, None),
        ({"a": 1.0}, {"a": 2.0}, 0.0, None),
    ],
)
def test_counter_rate(
    before: dict[str, float], now: dict[str, float], dt: float, expected: float | None
) -> None:
    assert counter_rate(before, now, dt) == expected


@pytest.mark.parametrize(
    ("before", "now", "expected"),
    [
        ({0: (0, 0), 1: (0, 0)}, {0: (50, 100), 1: (100, 100)}, (75.0, 100.0)),
        ({0: (0, 0)}, {0: (0, 100), 1: (100, 100)}, (0.0, 0.0)),  # a core appearing is skipped
        ({0: (10, 10)}, {0: (5, 20)}, None),
        ({0: (10, 10)}, {0: (10, 10)}, None),
        ({0: (0, 0)}, {0: (120, 100)}, (100.0, 100.0)),  # iowait running backwards
        ({0: (10.0, 10.0)}, {0: (10.0 - 7e-12, 10.07)}, (0.0, 0.0)),  # float rounding
        ({0: (10, 20), 1: (0, 0)}, {0: (15, 18), 1: (5, 15)}, (50.0, 100.0)),  # idle ran back
    ],
)
def test_busy_percent(
    before: dict[int, tuple[float, float]],
    now: dict[int, tuple[float, float]],
    expected: tuple[float, float] | None,
) -> None:
    assert busy_percent(before, now) == expected


def test_a_root_whose_exit_its_parent_reports_gives_no_event_of_its_own(
    host: HostSource, ps: FakePsutil
) -> None:
    ps.spawn(10)
    ps.spawn(11, parent=10)
    host.watch_pid(10, returncode=lambda: 1, report_exit=False)
    host.read(1.0)
    ps.procs[11].gone = True
    ps.procs[10].gone = True
    exits = host.read(2.0).events
    assert [(e.kind, e.labels["pid"]) for e in exits] == [("process_exit", "11")]
    assert host.watched == []
