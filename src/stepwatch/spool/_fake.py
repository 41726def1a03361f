"""FakeCollector: an in-process collector speaking the ingest and runs API, for tests that ship.

It keeps batches in memory, drops duplicates by (source, seq) as the real one
does, and can be told to misbehave: answer 503, lose the reply after storing
the batch, reject chosen batches with 400, or answer any requests with chosen
statuses (the pages of a proxy in front of it among them).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..model import SampleBatch
from ..wire import WireError, decode

__all__ = ["FakeCollector", "Faults"]


@dataclass(slots=True)
class Faults:
    """What the fake does wrong next: counts go down as faults are served."""

    fail_next: int = 0  # answer 503 without storing
    lose_replies: int = 0  # store the batch, then answer 503 as if the reply got lost
    reject_seqs: set[int] = field(default_factory=set)  # answer 400 to batches with these seqs
    #: Answer the next requests with these statuses and a proxy's HTML page, taking nothing...
    proxy_pages: list[int] = field(default_factory=list)
    #: ...then with these statuses and the collector's JSON error.
    statuses: list[int] = field(default_factory=list)


_PROXY_PAGE = "<html><body><h1>{status}</h1><hr>nginx</body></html>"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    collector: FakeCollector

    def setup(self) -> None:
        super().setup()
        self.collector.note_connection()

    def do_POST(self) -> None:  # noqa: N802 - the http.server spelling
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        status, doc = self.collector.handle(self.path, dict(self.headers), body)
        page = isinstance(doc, str)
        raw = doc.encode() if isinstance(doc, str) else json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html" if page else "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read the collector's state, not its access log."""


class FakeCollector:
    """A collector on a free loopback port (``.url``); use as a context manager."""

    def __init__(self, token: str | None = None, host: str = "127.0.0.1") -> None:
        self.token = token
        self.faults = Faults()
        self.batches: list[SampleBatch] = []
        self.runs: dict[str, dict[str, Any]] = {}
        self.finishes: dict[str, dict[str, Any]] = {}
        self.paths: list[str] = []
        self.duplicates = 0
        self.connections = 0
        self._last_seq: dict[str, int] = {}
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"collector": self})
        self._server = ThreadingHTTPServer((host, 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="stepwatch-fake-collector", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def note_connection(self) -> None:
        with self._lock:
            self.connections += 1

    def handle(
        self, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, Any] | str]:
        """Answer one POST as the real collector would (plus the configured faults); a str
        answer is an HTML page."""
        with self._lock:
            pages, statuses = self.faults.proxy_pages, self.faults.statuses
            if pages:
                status = pages.pop(0)
                return status, _PROXY_PAGE.format(status=status)
            if statuses:
                status = statuses.pop(0)
                return status, {"error": f"answered {status} (fault injected)"}
        if self.token and headers.get("Authorization") != f"Bearer {self.token}":
            return 401, {"error": "missing or wrong bearer token"}
        with self._lock:
            self.paths.append(path)
            if path == "/api/v1/ingest":
                return self._ingest(body)
            if path == "/api/v1/runs":
                doc = json.loads(body)
                self.runs[doc["id"]] = {**self.runs.get(doc["id"], {}), **doc}
                return 200, self.runs[doc["id"]]
            if path.startswith("/api/v1/runs/") and path.endswith("/finish"):
                self.finishes[path.split("/")[4]] = json.loads(body)
                return 200, {}
        return 404, {"error": f"no route {path}"}

    def _ingest(self, body: bytes) -> tuple[int, dict[str, Any]]:
        if self.faults.fail_next:
            self.faults.fail_next -= 1
            return 503, {"error": "unavailable (fault injected)"}
        try:
            batch = decode(body)
        except WireError as exc:
            return 400, {"error": str(exc)}
        if batch.seq in self.faults.reject_seqs:
            return 400, {"error": f"batch {batch.seq} rejected (fault injected)"}
        applied = batch.seq > self._last_seq.get(batch.source, -1)
        if applied:
            self._last_seq[batch.source] = batch.seq
            self.batches.append(batch)
        else:
            self.duplicates += 1
        if self.faults.lose_replies:
            self.faults.lose_replies -= 1
            return 503, {"error": "reply lost (fault injected)"}
        doc = {"applied": applied, "source": batch.source, "seq": batch.seq, "samples": len(batch)}
        return 200, doc

    def samples(self, name: str) -> list[tuple[dict[str, str], int, float]]:
        """Every stored sample of metric ``name`` as (labels, step, value), in arrival order."""
        with self._lock:
            batches = list(self.batches)
        out = []
        for batch in batches:
            for i in range(len(batch)):
                key = batch.keys[int(batch.series[i])]
                if key.name == name:
                    out.append((dict(key.labels), int(batch.step[i]), float(batch.value[i])))
        return out

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> FakeCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
