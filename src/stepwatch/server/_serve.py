"""Running the collector: ``serve`` (blocking, for the CLI) and ``ServerThread`` (in-process)."""

from __future__ import annotations

import errno
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

import uvicorn

from .._durable import DEFAULT_CHECKPOINT_INTERVAL_S
from .._encryption import EncryptionKey
from .._tls import ServerTls
from ..act import NotifyConfig, Playbooks, load_playbooks
from ..auth import TokenBook, admin_token_path, ensure_admin_token
from ..detect import RuleFiles, builtin_rules
from ..store import DEFAULT_RETENTION, DiskCap, Retention, Store
from ._app import DEFAULT_MAX_BODY_BYTES, create_app
from ._auth import is_loopback
from ._guards import HostAllowList
from ._notifications import load_config, served_at

__all__ = ["ServerThread", "serve"]

log = logging.getLogger("stepwatch.server")


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, telling us once it listens."""

    def __init__(self, config: uvicorn.Config, listening: threading.Event) -> None:
        super().__init__(config)
        self._listening = listening

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._listening.set()


class ListenError(OSError):
    """The collector cannot listen where asked; an OSError whose text says where and why."""

    def __str__(self) -> str:
        return str(self.strerror)


def _bind(host: str, port: int) -> socket.socket:
    """Bind here, not in uvicorn, so bind errors reach the caller and port 0 works."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    try:
        sock = socket.create_server((bare, port), family=family)
    except OSError as exc:
        why = (exc.strerror or str(exc)).lower()
        if exc.errno == errno.EADDRINUSE:
            why = "the port is in use (by another collector?); --port chooses another"
        raise ListenError(exc.errno, f"cannot listen on {host}:{port}: {why}") from exc
    # Accepted connections inherit it: asyncio sets it only on sockets made with IPPROTO_TCP,
    # and without it a response's second write waits for the client's delayed ACK (40 ms).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _url(sock: socket.socket, scheme: str) -> str:
    """The address a bound socket is reached at."""
    host, port = sock.getsockname()[:2]
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


class ServerThread:
    """The collector in a background thread of this process: start(), url, stop()."""

    def __init__(
        self,
        store_path: str | Path,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        auth: bool | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        rules: Sequence[str | Path] = (),
        notify: str | Path | None = None,
        playbooks: str | Path | None = None,
        key: EncryptionKey | None = None,
        tls: ServerTls | None = None,
        allowed_hosts: Sequence[str] = (),
        checkpoint_interval_s: float = DEFAULT_CHECKPOINT_INTERVAL_S,
        metrics_public: bool = False,
        retention: Retention = DEFAULT_RETENTION,
        disk_cap: DiskCap | None = None,
        upkeep_interval_s: float = 10.0,
    ) -> None:
        """``auth``: require tokens (None: whenever ``host`` is not a loopback address);
        ``metrics_public``: /metrics without a token."""
        if not checkpoint_interval_s > 0:  # before anything opens
            raise ValueError(f"the checkpoint interval must be above 0 s: {checkpoint_interval_s}")
        self._checkpoint_interval_s = checkpoint_interval_s
        self._hosts = HostAllowList.of(host, allowed_hosts)  # a wrong name fails here, at once
        self._store_path = Path(store_path)
        self._key = key
        self._tls = tls
        self._notify_path = notify
        self._playbooks_path = playbooks
        self._rules = RuleFiles(rules, base=builtin_rules())
        self._host = host
        self._port = port
        self._auth = not is_loopback(host) if auth is None else auth
        #: Where the first start with auth wrote the admin token (None: one existed already).
        self.admin_token_file: Path | None = None
        self._max_body_bytes = max_body_bytes
        self._metrics_public = metrics_public
        self._retention, self._disk_cap = retention, disk_cap
        self._upkeep_interval_s = upkeep_interval_s
        self._listening = threading.Event()
        self._thread: threading.Thread | None = None
        self._server: _Uvicorn | None = None
        self.url = ""

    def start(self) -> ServerThread:
        """Bind, open the store, and return once the collector listens (raise if it cannot).

        Its threads block SIGINT/SIGTERM, so those reach the main thread and wake it.
        """
        if not self._auth and not is_loopback(self._host):
            log.warning(
                "serving %s without --auth: anyone who can reach it may do anything", self._host
            )
        self._rules.load()  # a mistake in a rule file stops the start, before anything opens
        if self._tls is not None:
            self._tls.check()  # so does a certificate or key that cannot be loaded
        notify = load_config(self._notify_path)  # so does one in the notifications file
        playbooks = load_playbooks(self._playbooks_path) if self._playbooks_path else None
        self._sock = _bind(self._host, self._port)  # a taken port leaves the store untouched
        try:
            self._store = Store(self._store_path, key=self._key)
        except BaseException:
            self._sock.close()
            raise
        with _signals_for_main_thread_only():
            self._serve(notify, playbooks)
        return self

    def start_or_elsewhere(self, say: Callable[[str], object]) -> ServerThread:
        """Start on the configured port or, when another program has it, on a free one (said)."""
        try:
            return self.start()
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or self._port == 0:
                raise
        taken, self._port = self._port, 0
        self.start()
        say(f"port {taken} is in use; the collector listens on {self.url} instead")
        return self

    def _serve(self, notify: NotifyConfig | None, playbooks: Playbooks | None) -> None:
        """Run the app over the bound socket and the open store in the server thread."""
        tokens = None
        if self._auth:
            tokens = TokenBook(self._store)
            self.admin_token_file = ensure_admin_token(tokens, admin_token_path(self._store_path))
        url = _url(self._sock, "https" if self._tls else "http")
        app = create_app(
            self._store,
            tokens=tokens,
            max_body_bytes=self._max_body_bytes,
            allowed_hosts=self._hosts,
            rules=self._rules,
            notify=served_at(notify, url),
            playbooks=playbooks,
            checkpoint_interval_s=self._checkpoint_interval_s,
            metrics_public=self._metrics_public,
            retention=self._retention,
            disk_cap=self._disk_cap,
            upkeep_interval_s=self._upkeep_interval_s,
        )
        self._streams = app.state.streams
        self._alert_streams = app.state.alert_streams
        tls = self._tls.uvicorn_options() if self._tls else {}
        config = uvicorn.Config(app, log_config=None, log_level="warning", access_log=False, **tls)
        self._server = server = _Uvicorn(config, self._listening)
        self._thread = threading.Thread(
            target=server.run,
            kwargs={"sockets": [self._sock]},
            name="stepwatch-server",
            daemon=True,
        )
        self._thread.start()
        while not self._listening.wait(0.1):
            if not self._thread.is_alive():  # uvicorn exits the thread when startup fails
                break
        if not server.started:
            self.stop()
            raise RuntimeError(f"the collector on {self._host} failed to start (see the log)")
        self.url = url

    def request_stop(self) -> None:
        """Ask the server to shut down (safe from a signal handler); ``stop`` waits for it."""
        if self._server is not None:
            self._server.should_exit = True
            self._streams.close()  # open event streams would hold the shutdown up
            self._alert_streams.close()

    def join(self) -> None:
        """Wait until the server has shut down."""
        if self._thread is not None:
            self._thread.join()

    def serve_until_stopped(self) -> None:
        """Wait until SIGINT or SIGTERM (or ``request_stop``) has shut the server down."""
        with _stop_on_signals(self.request_stop):
            self.join()

    def stop(self) -> None:
        """Shut down gracefully: finish requests, drain the ingest queue, compact, close store."""
        if self._thread is None:
            return
        self.request_stop()
        self._thread.join()
        self._thread = None
        self._sock.close()
        self._store.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


_HANDLED = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def _stop_on_signals(stop: Callable[[], None]) -> Iterator[None]:
    """Route SIGINT/SIGTERM to a graceful stop (only the main thread may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda *_: stop()) for sig in _HANDLED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def _signals_for_main_thread_only() -> Iterator[None]:
    """Threads started inside block SIGINT/SIGTERM, so these reach the main thread and wake it."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def serve(
    store_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 7070,
    auth: bool | None = None,
    ready: threading.Event | None = None,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    out: Callable[[str], None] = print,
    rules: Sequence[str | Path] = (),
    notify: str | Path | None = None,
    playbooks: str | Path | None = None,
    key: EncryptionKey | None = None,
    tls: ServerTls | None = None,
    allowed_hosts: Sequence[str] = (),
    checkpoint_interval_s: float = DEFAULT_CHECKPOINT_INTERVAL_S,
    metrics_public: bool = False,
    retention: Retention = DEFAULT_RETENTION,
    disk_cap: DiskCap | None = None,
    upkeep_interval_s: float = 10.0,
) -> None:
    """Run the collector until SIGINT/SIGTERM, then shut down gracefully (blocking).

    Args:
        store_path: the DuckDB file; created when missing.
        host, port: where to listen; port 0 picks a free port.
        auth: require tokens on every route but the probes and the page shell (None: on
            whenever ``host`` is not a loopback address); the first start writes an admin
            token beside the store and says where.
        ready: set once the collector listens.
        max_body_bytes: ingest bodies above this are refused with 413.
        out: where the URL line goes.
        rules: rule files added to the built-in pack (a rule of the same group and name
            replaces the built-in one); re-read when they change.
        notify: the notifications file: receivers, and routes of alerts to them.
        playbooks: the playbooks file: the remediations alerts and people may run.
        key: the store is an encrypted database under this key (None: a plain file).
        tls: serve HTTPS with this certificate (and, with a client CA, mutual TLS).
        allowed_hosts: names the collector is reached by, besides its bind address and
            localhost (a request under another Host name is refused: DNS rebinding).
        checkpoint_interval_s: seconds between checkpoints of the detection state.
        metrics_public: /metrics answers without a token even with auth on (its figures name
            no run nor project).
        retention: how long raw samples, each rollup tier and ingested events are kept.
        disk_cap: how large the store may grow (None: what its file system has room for);
            the collector alerts at 80 % of it and sheds the oldest data near it.
        upkeep_interval_s: how often retention runs and the store's size is measured.
    """
    server = ServerThread(
        store_path,
        host,
        port,
        auth=auth,
        max_body_bytes=max_body_bytes,
        rules=rules,
        playbooks=playbooks,
        notify=notify,
        key=key,
        tls=tls,
        allowed_hosts=allowed_hosts,
        checkpoint_interval_s=checkpoint_interval_s,
        metrics_public=metrics_public,
        retention=retention,
        disk_cap=disk_cap,
        upkeep_interval_s=upkeep_interval_s,
    )
    with _stop_on_signals(server.request_stop):
        server.start()
        try:
            out(f"stepwatch collector listening on {server.url}")
            if server.admin_token_file is not None:
                out(
                    f"admin token written to {server.admin_token_file} (readable only by you): "
                    "stepwatch token create makes the others"
                )
            if ready is not None:
                ready.set()
            server.join()
        finally:
            server.stop()
