"""The `stepwatch top` loop: fetch, draw, wait for the interval or a key; q or Ctrl-C quits."""

from __future__ import annotations

import os
import select
import sys
import time
from types import TracebackType
from typing import IO, Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from .._tls import ClientTls
from ._fetch import TopClient, TopError
from ._render import render

__all__ = ["watch"]

QUIT_KEYS = frozenset(b"qQ")


class _Keys:
    """Key presses from a terminal, read one at a time (cbreak) while the view is up."""

    def __init__(self, stream: IO[Any] | None) -> None:
        try:
            self.fd: int | None = stream.fileno() if stream is not None else None
        except (OSError, ValueError):  # a replaced stdin (tests, embedding) has no descriptor
            self.fd = None
        self._saved: list[Any] | None = None

    def __enter__(self) -> _Keys:
        if self.fd is not None and os.isatty(self.fd):
            import termios
            import tty

            self._saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)  # keys arrive unbuffered; Ctrl-C still interrupts
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._saved is not None and self.fd is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)

    def quit_within(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s``; True as soon as a quit key is pressed."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            if self.fd is None:
                time.sleep(left)
                return False
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                data = os.read(self.fd, 64)
                if not data:  # end of input: only Ctrl-C or the deadline from now on
                    self.fd = None
                elif QUIT_KEYS.intersection(data):
                    return True
        return False


def _footer(interval_s: float) -> Text:
    now = time.strftime("%H:%M:%S")
    return Text(f"q quits · every {interval_s:g} s · {now}", style="dim")


def watch(
    server: str,
    run_id: str | None = None,
    *,
    token: str | None = None,
    tls: ClientTls | None = None,
    interval_s: float = 2.0,
    once: bool = False,
    console: Console | None = None,
    keys: IO[Any] | None = None,
) -> None:
    """Show one run (default: the most recent running one) until q or Ctrl-C.

    Args:
        server: the collector's base URL.
        run_id: the run to watch; None picks one.
        token: bearer token, when the collector requires one.
        tls: the CA to trust and the client certificate, for an ``https://`` server.
        interval_s: seconds between refreshes.
        once: print a single frame and return.
        console: where to draw (the terminal by default).
        keys: where key presses come from (stdin by default).
    """
    console = console or Console()
    with TopClient(server, token, tls=tls) as client:
        run = run_id or client.pick_run()
        if once:
            console.print(render(client.snapshot(run)))
            return
        try:
            _loop(client, run, interval_s, console, keys)
        except KeyboardInterrupt:
            pass


def _loop(
    client: TopClient, run_id: str, interval_s: float, console: Console, keys: IO[Any] | None
) -> None:
    """Redraw every ``interval_s`` at the terminal's current size; a failed fetch keeps the
    last good frame on screen with the reason, and the next one is tried as usual."""
    last, error = client.snapshot(run_id), None
    with (
        _Keys(sys.stdin if keys is None else keys) as pressed,
        Live(console=console, auto_refresh=False, screen=console.is_terminal) as live,
    ):
        while True:
            notes = [Text(f"stale: {error}", style="red")] if error else []
            notes.append(_footer(interval_s))
            now = time.time() if error else None
            frame = render(last, now, height=console.height - len(notes))
            live.update(Group(frame, *notes), refresh=True)
            if pressed.quit_within(interval_s):
                return
            try:
                last, error = client.snapshot(run_id), None
            except TopError as exc:
                error = exc
