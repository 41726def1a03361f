"""A real HTTP server for the tests, a thread on a free loopback port: it records every POST
and answers each with the next of its canned answers, then with its usual one. Notification
receivers (webhooks, Slack) and a model's chat endpoint are such servers."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

WAIT_S = 30.0
#: An answer that never comes (until the server stops).
HANG = None
Answer = tuple[int, bytes] | None


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Recorder:
    """What the server was sent; the answers it gives, in order, then ``reply()``; with
    ``slow``, it answers nothing until ``released`` (set when the server stops)."""

    url: str = ""
    requests: list[Request] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    slow: bool = False
    content_type: str = "text/plain"
    arrived: threading.Condition = field(default_factory=threading.Condition)
    released: threading.Event = field(default_factory=threading.Event)

    def reply(self) -> tuple[int, bytes]:
        """The answer once the canned ones have run out."""
        return 200, b"ok"

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
                answer = recorder.answers.pop(0) if recorder.answers else recorder.reply()
                recorder.arrived.notify_all()
            if recorder.slow or answer is HANG:
                recorder.released.wait(WAIT_S)
            if answer is HANG:
                return
            status, content = answer
            self.send_response(status)
            self.send_header("Content-Type", recorder.content_type)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serving(recorder: Recorder, name: str = "recorder") -> Iterator[Recorder]:
    """``recorder`` served (its ``url`` set to the server's) until the end."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(recorder))
    server.daemon_threads = False  # each request's thread is joined on close
    recorder.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name=name)
    thread.start()
    try:
        yield recorder
    finally:
        recorder.released.set()
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def recording_server(answers: Sequence[int] = (), slow: bool = False) -> Iterator[Recorder]:
    """A receiver answering ``answers`` (statuses) in order, then 200; stopped at the end."""
    recorder = Recorder(answers=[(status, b"ok") for status in answers], slow=slow)
    with serving(recorder, "webhook-server"):
        yield recorder
