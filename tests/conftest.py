"""Fixtures shared by every test: the real collector in a subprocess, other programs a test
starts (stopped by PID at the end), polling for what a collector does after it answered, a loss
ingest document, and a thread-leak check."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from _certs import Certs, make_certs

from stepwatch.spool import ClientTls

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
#: How long ``eventually`` waits for what a collector does after it answered (detection runs
#: after the ingest is acknowledged).
EVENTUALLY_S = 30.0


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def port() -> int:
    """A free loopback port for a server the test starts (conftests below share it this way)."""
    return free_port()


def stop_process(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM by PID, SIGKILL if it lingers; always reaped, so nothing is left running."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


@dataclass
class Collector:
    """The real collector (``python -m stepwatch.server``) as a child process."""

    store_path: Path
    port: int
    log_path: Path
    auth: bool = False
    extra_args: tuple[str, ...] = ()
    #: How clients reach it over TLS (None: plain HTTP); start it with the --tls-* extra_args.
    tls: ClientTls | None = None
    proc: subprocess.Popen[bytes] | None = None
    #: With ``auth``: the admin token of every project (what ``headers`` sends).
    token: str | None = None
    #: With ``auth``: a token per (role, project), for projects ``default`` and ``other``.
    tokens: dict[tuple[str, str], str] = field(default_factory=dict)
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        """What a client must send when the collector has auth on (the admin's token)."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def headers_of(self, role: str, project: str = "default") -> dict[str, str]:
        """The bearer header of the token of ``role`` over ``project``."""
        return {"Authorization": f"Bearer {self.tokens[role, project]}"}

    def _make_tokens(self) -> None:
        """Tokens made on the store before the collector opens it, as an operator would."""
        from stepwatch.auth import ALL_PROJECTS, Role, TokenBook
        from stepwatch.store import Store

        with Store(self.store_path) as store:
            book = TokenBook(store)
            self.token = book.create(Role.ADMIN, [ALL_PROJECTS], name="root")[1]
            for role in Role:
                for project in ("default", "other"):
                    name = f"{role.value}-{project}"
                    self.tokens[role.value, project] = book.create(role, [project], name=name)[1]

    def start(self) -> None:
        """Start the process and return once /readyz answers 200."""
        args = ["--store", str(self.store_path), "--port", str(self.port), *self.extra_args]
        if self.auth:
            if not self.tokens:
                self._make_tokens()
            args.append("--auth")
        env = {k: v for k, v in os.environ.items() if k != "STEPWATCH_TOKEN"}
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "stepwatch.server", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        verify = self.tls.context() if self.tls else True
        while self.proc.poll() is None and time.monotonic() < deadline:
            try:
                url, headers = f"{self.url}/readyz", self.headers
                ready = httpx.get(url, headers=headers, timeout=2, verify=verify)
                if ready.is_success:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"collector did not become ready:\n{self.log()}")

    def log(self) -> str:
        """Everything the process printed so far."""
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self._reap()

    def stop(self) -> int | None:
        """SIGTERM and wait for the graceful shutdown; returns the exit code."""
        if self.proc is not None:
            stop_process(self.proc)
        return self._reap()

    def restart(self) -> None:
        """Stop (if running) and start again on the same store and port."""
        self.stop()
        self.start()

    def _reap(self) -> int | None:
        code = self.proc.wait() if self.proc is not None else None
        if self._log is not None:
            self._log.close()
            self._log = None
        return code


CollectorFactory = Callable[..., Collector]


class _Collectors:
    """Starts collectors under one directory and stops every one of them at the end."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.started: list[Collector] = []

    def start(
        self,
        auth: bool = False,
        extra_args: tuple[str, ...] = (),
        tls: ClientTls | None = None,
    ) -> Collector:
        home = self.base / f"collector{len(self.started)}"
        home.mkdir()
        collector = Collector(
            home / "store.duckdb", free_port(), home / "collector.log", auth, extra_args, tls
        )
        self.started.append(collector)
        collector.start()
        return collector

    def stop_all(self) -> None:
        for collector in self.started:
            collector.stop()


@pytest.fixture
def collector_factory(tmp_path: Path) -> Iterator[CollectorFactory]:
    """Start collectors with options (``auth=True``: tokens per role and project, see
    ``Collector.tokens``; ``extra_args=``); all are stopped at the end."""
    collectors = _Collectors(tmp_path)
    yield collectors.start
    collectors.stop_all()


@pytest.fixture(scope="module")
def module_collector_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[CollectorFactory]:
    """Like ``collector_factory``, for collectors shared by the tests of one module."""
    collectors = _Collectors(tmp_path_factory.mktemp("collectors"))
    yield collectors.start
    collectors.stop_all()


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A CA, the collector's and a client's certificates, and an unrelated CA, made now."""
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def tls_server(collector_factory: CollectorFactory, certs: Certs) -> Collector:
    """A running collector serving HTTPS with the ``certs`` CA's certificate (``.url``,
    ``.tls``: what a client trusts it with)."""
    tls_args = ("--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key))
    return collector_factory(extra_args=tls_args, tls=ClientTls(ca_file=certs.ca))


@pytest.fixture
def server(collector_factory: CollectorFactory) -> Collector:
    """A running collector on a fresh store: ``.url``, ``.store_path``, ``.proc``, ``.kill()``,
    ``.restart()``."""
    return collector_factory()


class Processes:
    """Programs started with their output in a log file; ``stop_all`` stops every one by PID."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, args: Sequence[str], log_path: Path) -> subprocess.Popen[bytes]:
        """Start ``args`` with stdout and stderr going to ``log_path``."""
        with log_path.open("wb") as out:
            proc = subprocess.Popen(list(args), stdout=out, stderr=subprocess.STDOUT)
        self.started.append(proc)
        return proc

    def start_daemon(
        self, binary: str, args: Sequence[str], ready_url: str, log_path: Path
    ) -> subprocess.Popen[bytes]:
        """Start a Debian-packaged daemon and return once ``ready_url`` answers 200."""
        found = shutil.which(binary) or shutil.which(f"/usr/bin/{binary}")
        if found is None:
            pytest.fail(f"{binary} is not installed: run scripts/system-deps")
        proc = self.start([found, *args], log_path)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(ready_url, timeout=2).status_code == 200:
                    return proc
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"{binary} did not answer on {ready_url}:\n{log_path.read_text()}")

    def stop_all(self) -> None:
        for proc in self.started:
            stop_process(proc)


@pytest.fixture
def processes() -> Iterator[Processes]:
    """Start programs (``.start``, ``.start_daemon``) for one test; all stopped at teardown."""
    started = Processes()
    yield started
    started.stop_all()


@pytest.fixture(scope="session")
def session_processes() -> Iterator[Processes]:
    """Like ``processes``, for programs shared by the whole session."""
    started = Processes()
    yield started
    started.stop_all()


def poll(fetch: Callable[[], Any], timeout_s: float = EVENTUALLY_S) -> Any:
    """``fetch()`` again until its answer is truthy or ``timeout_s`` passed; the last answer,
    for the caller to assert on."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = fetch()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


Eventually = Callable[..., Any]


@pytest.fixture
def eventually() -> Eventually:
    """``eventually(fetch, timeout_s=30)``: poll ``fetch`` until it gives something truthy."""
    return poll


def make_loss_doc(seq: int, run: str, values: list[float | str], t0: float) -> dict[str, Any]:
    """An ingest document of one run's ``loss``: step i at ``t0 + i`` (``"NaN"`` for NaN)."""
    samples = [
        {"name": "loss", "labels": {"run": run}, "step": i, "ts": t0 + i, "value": v}
        for i, v in enumerate(values)
    ]
    return {"source": f"trainer-{run}", "seq": seq, "samples": samples}


LossDoc = Callable[[int, str, list[float | str], float], dict[str, Any]]


@pytest.fixture
def loss_doc() -> LossDoc:
    """``loss_doc(seq, run, values, t0)``: see ``make_loss_doc``."""
    return make_loss_doc


@pytest.fixture(autouse=True)
def own_spool_root(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Producers that spool under the default root use one of this test's own: the real
    ~/.stepwatch/spool is never touched, and no test ships spools another test left behind."""
    monkeypatch.setenv("STEPWATCH_DIR", str(tmp_path_factory.mktemp("spool-root")))


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves a thread running behind it."""
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate() if t not in before]
    for thread in leaked:
        thread.join(timeout=5)  # threads already on their way out get a moment
    alive = [t.name for t in leaked if t.is_alive()]
    if alive:
        pytest.fail(f"test leaked threads: {', '.join(alive)}")
