"""Real parts for the notification tests: alerts as the detector makes them, and a local HTTP
server (a thread on a free loopback port) that records what it is sent."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from stepwatch.detect import AlertState, LiveAlert, alert_id

T0 = 1_780_000_000.0
WAIT_S = 30.0


def alert(
    kind: str = "straggler",
    state: str = AlertState.FIRING,
    severity: str = "warning",
    since: float = T0,
    value: float = 1.8,
    baseline: float | None = None,
    **labels: str,
) -> LiveAlert:
    """One transition, the way the live detector hands it to subscribers."""
    labels = {"run": "r1", **labels}
    return LiveAlert(
        id=alert_id("builtin", kind, labels, since),
        group="builtin",
        rule=kind,
        kind=kind,
        state=state,
        severity=severity,
        since=since,
        ts=since + (60.0 if state != AlertState.FIRING else 0.0),
        value=value,
        labels=labels,
        annotations={"summary": f"{kind} at {value}", "description": f"why {kind} matters"},
        playbook=f"what to do about {kind}",
        baseline=baseline,
    )


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Recorder:
    """What the server was sent; the answers it gives, in order (then 200 for good); a
    ``hold`` it waits on before answering (a slow receiver), released at the end."""

    url: str = ""
    requests: list[Request] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)
    hold: threading.Event | None = None
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, count: int, timeout: float = WAIT_S) -> list[Request]:
        """The first ``count`` requests, once they have come (fewer after ``timeout``)."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.requests) >= count, timeout)
            return list(self.requests)


def _handler(recorder: Recorder) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with recorder.arrived:
                recorder.requests.append(Request(self.path, dict(self.headers), body))
                status = recorder.answers.pop(0) if recorder.answers else 200
                recorder.arrived.notify_all()
            if recorder.hold is not None:
                recorder.hold.wait(WAIT_S)
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextmanager
def recording_server(answers: list[int] | None = None, slow: bool = False) -> Iterator[Recorder]:
    """A real HTTP server on a free loopback port, recording every POST; stopped at the end."""
    recorder = Recorder(answers=list(answers or []), hold=threading.Event() if slow else None)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(recorder))
    server.daemon_threads = False  # each request's thread is joined on close
    recorder.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="webhook-server")
    thread.start()
    try:
        yield recorder
    finally:
        if recorder.hold is not None:
            recorder.hold.set()
        server.shutdown()
        server.server_close()
        thread.join()
