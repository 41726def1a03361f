"""Running the collector: ``serve`` (blocking, for the CLI) and ``ServerThread`` (in-process)."""

from __future__ import annotations

import dataclasses
import errno
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import uvicorn

from ..act import NotifyConfig, Playbooks, load_playbooks
from ..auth import TokenBook, admin_token_path, ensure_admin_token
from ..detect import RuleFiles, builtin_rules
from ..store import Store, TokenRecord
from ._app import create_app
from ._auth import is_loopback
from ._notifications import load_config, served_at
from ._options import DEFAULT_OPTIONS, CollectorOptions

__all__ = ["ServerThread", "serve"]

if TYPE_CHECKING:
    from ..fleet import BrokerIntake, BrokerLayout

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

    def __init__(self, store_path: str | Path, options: CollectorOptions = DEFAULT_OPTIONS) -> None:
        """Nothing opens before ``start``; a wrong Host name in ``options`` fails here."""
        self._store_path = Path(store_path)
        self._options = options
        self._rules = RuleFiles(options.rules, base=builtin_rules())
        self._port = options.port
        #: Where the first start with auth wrote the admin token (None: one existed already).
        self.admin_token_file: Path | None = None
        self._listening = threading.Event()
        self._thread: threading.Thread | None = None
        #: Reads this collector's share of the broker (``--broker``), once it listens.
        self.intake: BrokerIntake | None = None
        self._server: _Uvicorn | None = None
        self.url = ""

    def start(self) -> ServerThread:
        """Bind, open the store, and return once the collector listens (raise if it cannot).

        Its threads block SIGINT/SIGTERM, so those reach the main thread and wake it.
        """
        o = self._options
        if not o.requires_auth and not is_loopback(o.host):
            log.warning(
                "serving %s without --auth: anyone who can reach it may do anything", o.host
            )
        self._rules.load()  # a mistake in a rule file stops the start, before anything opens
        if o.tls is not None:
            o.tls.check()  # so does a certificate or key that cannot be loaded
        notify = load_config(o.notify)  # so does one in the notifications file
        playbooks = load_playbooks(o.playbooks) if o.playbooks else None
        self._sock = _bind(o.host, self._port)  # a taken port leaves the store untouched
        try:
            self._store = Store(self._store_path, key=o.key, memory_limit=o.store_memory_bytes)
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
        o = self._options
        tokens = None
        if o.requires_auth:
            tokens = TokenBook(self._store)
            self.admin_token_file = ensure_admin_token(tokens, admin_token_path(self._store_path))
        url = _url(self._sock, "https" if o.tls else "http")
        app = create_app(
            self._store,
            o,
            tokens=tokens,
            rules=self._rules,
            notify=served_at(notify, url),
            playbooks=playbooks,
        )
        self._streams = app.state.streams
        self._alert_streams = app.state.alert_streams
        self._fleet = app.state.fleet
        tls = o.tls.uvicorn_options() if o.tls else {}
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
            raise RuntimeError(f"the collector on {o.host} failed to start (see the log)")
        self.url = url
        if o.broker is not None:
            try:
                self.intake = _intake(o, o.broker, url, self._store_path, tokens)
                app.state.fleet.intake = self.intake
            except BaseException:
                self.stop()
                raise

    def request_stop(self) -> None:
        """Ask the server to shut down (safe from a signal handler); ``stop`` waits for it."""
        if self._server is not None:
            self._server.should_exit = True
            self._streams.close()  # open event streams would hold the shutdown up
            self._alert_streams.close()
            if self._fleet.relays is not None:  # and the streams relayed from other members
                self._fleet.relays.close()

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
        if self.intake is not None:  # what it holds goes in before the server stops
            self.intake.stop()
            self.intake = None
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


def _intake(
    o: CollectorOptions, layout: BrokerLayout, url: str, store: Path, tokens: TokenBook | None
) -> BrokerIntake:
    """Start reading this collector's share of the broker's partitions; with the fleet key,
    tell the fleet of this collector's tokens, and keep those the others tell of."""
    from ..fleet import BrokerIntake, Ledger, LocalCollector, Member

    member = Member(
        o.collector_id or f"{socket.gethostname()}:{url.rsplit(':', 1)[1]}", o.advertise_url or url
    )
    ledger = None
    if o.fleet_key is not None and tokens is not None:
        ledger = Ledger(o.fleet_key, member.id, lambda kind, doc: _told(tokens, kind, doc))
        tokens.on_change.append(lambda record: ledger.tell("token", dataclasses.asdict(record)))
        for record in tokens.tokens():  # made before this start, or offline
            ledger.tell("token", dataclasses.asdict(record))
    offsets = store.with_name(store.name + ".broker-offsets.json")
    return BrokerIntake(layout, member, offsets, LocalCollector(url), ledger=ledger).start()


def _told(tokens: TokenBook, kind: str, doc: dict[str, Any]) -> None:
    """A record of the fleet's ledger: a token another collector made or revoked."""
    if kind == "token":
        tokens.adopt(TokenRecord(**{**doc, "projects": tuple(doc["projects"])}))


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
    options: CollectorOptions = DEFAULT_OPTIONS,
    *,
    ready: threading.Event | None = None,
    out: Callable[[str], None] = print,
) -> None:
    """Run the collector on ``store_path`` (created when missing) until SIGINT/SIGTERM, then
    shut down gracefully (blocking). The first start with auth writes an admin token beside the
    store and says where; ``ready`` is set once it listens; ``out`` gets the URL line."""
    server = ServerThread(store_path, options)
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
