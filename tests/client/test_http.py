"""The one client's session against a real collector (and a stand-in for what may sit in front
of one): list routes followed page after page by cursor, a read sent again once on a dropped
connection, and every failure one line that names the request and never the token."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from stepwatch.client import ApiSession, ClientError, CollectorClient
from stepwatch.model import Event, RecordBatch, Run
from stepwatch.store import Store

T0 = 1_780_000_000.0


class _Counting(httpx.HTTPTransport):
    """The network, counting the requests sent through it."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return super().handle_request(request)


def _action(i: int) -> Event:
    data = {"id": f"x{i:02}", "playbook": "drain", "labels": {"run": "r1"}, "dry_run": True}
    data |= {"state": "ok", "requested_by": "ana", "created": T0 + i, "updated": T0 + i}
    return Event(T0 + i, "action", "drain", {"run": "r1"}, data)


def _alert(i: int) -> Event:
    data = {"id": f"a{i:02}", "rule": "R", "kind": "gpu_hot", "severity": "warning"}
    data |= {"state": "resolved", "since": T0 + i}
    return Event(T0 + i, "alert", "x", {"run": "r1"}, data)


@pytest.fixture(scope="module")
def seeded(module_collector_factory: Any) -> Any:
    """A collector whose store already holds 12 actions and 23 alerts of run r1."""
    collector = module_collector_factory()
    collector.stop()
    with Store(collector.store_path) as store:
        store.upsert_run(Run("r1", start=T0))
        events = [_action(i) for i in range(12)] + [_alert(i) for i in range(23)]
        store.apply([RecordBatch.of("stepwatch.collector", events)])
    collector.start()
    return collector


def test_a_list_is_followed_page_after_page_and_each_item_comes_once(seeded: Any) -> None:
    network = _Counting()
    with CollectorClient(seeded.url, transport=network, page_size=5) as client:
        actions = client.actions()
        assert len(network.sent) == 3  # 5 + 5 + 2
        alerts = client.alerts(state="all", limit=None)
    assert [a["id"] for a in actions] == [f"x{i:02}" for i in range(11, -1, -1)]
    assert sorted(a["id"] for a in alerts) == [f"a{i:02}" for i in range(23)]
    later = [r.url.params.get("cursor") for r in network.sent[1:3]]
    assert all(later) and later[0] != later[1]


def test_a_limit_stops_the_paging_where_it_is_reached(seeded: Any) -> None:
    network = _Counting()
    with CollectorClient(seeded.url, transport=network, page_size=5) as client:
        some = client.alerts(state="all", limit=7)
        every = client.alerts(state="all", limit=None)
    assert [a["id"] for a in some] == [a["id"] for a in every[:7]]
    assert [r.url.params["limit"] for r in network.sent[:2]] == ["5", "2"]


def test_a_collector_nobody_runs_is_one_line_without_a_status(port: int) -> None:
    url = f"http://127.0.0.1:{port}"
    with ApiSession(url) as session, pytest.raises(ClientError) as caught:
        session.call("GET", "/runs")
    assert caught.value.status is None
    assert str(caught.value) == (
        f"cannot reach the collector at {url} (connection refused): start one "
        "(stepwatch server) or name it with --server URL"
    )


def test_a_missing_or_wrong_token_says_so_and_never_shows_the_token(
    collector_factory: Any,
) -> None:
    collector = collector_factory(auth=True)
    with ApiSession(collector.url) as anonymous, pytest.raises(ClientError) as missing:
        anonymous.call("GET", "/alerts")
    assert missing.value.status == 401
    assert str(missing.value).startswith(f"{collector.url} needs a token (HTTP 401: missing ")
    assert str(missing.value).endswith("pass --token or set STEPWATCH_TOKEN")
    wrong = "sw_" + "x" * 40
    with ApiSession(collector.url, wrong) as guessed, pytest.raises(ClientError) as refused:
        guessed.call("GET", "/alerts")
    assert str(refused.value) == "GET /api/v1/alerts: HTTP 401: unknown token"
    viewer = collector.tokens["viewer", "default"]
    with ApiSession(collector.url, viewer) as session, pytest.raises(ClientError) as denied:
        session.call("POST", "/silences", json={"matchers": ["run=r1"], "duration_s": 60})
    assert denied.value.status == 403 and str(denied.value).startswith("POST /api/v1/silences")
    assert viewer not in str(denied.value) and wrong not in str(refused.value)


class _Front(http.server.BaseHTTPRequestHandler):
    """What may sit between a client and a collector: a 502 page for ``/runs``, a 200 that is
    HTML for ``/alerts``, an object where ``/audit`` lists, and on ``/tokens`` every other
    request dropped unanswered (a kept-alive connection closed as the request went out)."""

    server: _FrontServer

    def _answer(self) -> None:
        if self.path.startswith("/api/v1/tokens"):
            self.server.seen.append(self.command)
            if len(self.server.seen) % 2:
                self.close_connection = True
                return
            self._send(200, "application/json", b"[]")
            return
        if self.path.startswith("/api/v1/audit"):
            self._send(200, "application/json", b'{"records": []}')
            return
        page = b"<html>\n<body><h1>Bad Gateway</h1>\n" + b"x" * 400 + b"</body></html>"
        self._send(502 if self.path.startswith("/api/v1/runs") else 200, "text/html", page)

    do_GET = do_POST = _answer

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        """Quiet: the test reads what the client says, not the server's log."""


class _FrontServer(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Front)
        self.seen: list[str] = []


@pytest.fixture
def front() -> Iterator[_FrontServer]:
    server = _FrontServer()
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _url(server: _FrontServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_a_read_is_sent_again_once_and_a_change_never(front: _FrontServer) -> None:
    with ApiSession(_url(front)) as session:
        assert session.call("GET", "/tokens") == []
        with pytest.raises(ClientError, match="the collector at http") as dropped:
            session.call("POST", "/tokens", json={})
    assert front.seen == ["GET", "GET", "POST"]
    assert dropped.value.status is None


def test_an_answer_that_is_not_the_collectors_is_one_short_line(front: _FrontServer) -> None:
    with ApiSession(_url(front)) as session:
        with pytest.raises(ClientError) as gateway:
            session.call("GET", "/runs")
        with pytest.raises(ClientError) as html:
            session.call("GET", "/alerts")
    said = str(gateway.value)
    assert said.startswith("GET /api/v1/runs: HTTP 502: <html> <body><h1>Bad Gateway</h1> xxx")
    assert "\n" not in said and said.endswith("…") and len(said) < 260
    assert gateway.value.status == 502
    assert str(html.value).startswith("GET /api/v1/alerts: the answer is not JSON: <html> ")


def test_a_list_route_that_answers_no_list_is_refused(front: _FrontServer) -> None:
    with CollectorClient(_url(front)) as client, pytest.raises(ClientError) as odd:
        client.audit()
    assert str(odd.value) == "GET /api/v1/audit: the answer is not a list"


@pytest.mark.parametrize("size", [0, 10_001])
def test_a_page_size_the_routes_do_not_take_is_refused(size: int) -> None:
    with pytest.raises(ValueError, match=f"a page holds 1 to 10,000 items, not {size}"):
        ApiSession("http://127.0.0.1:7070", page_size=size)
