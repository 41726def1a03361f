"""In Chromium, a page of another origin cannot read the collector's API nor change anything
through it: the answer carries no CORS header, and a blind no-cors POST is refused."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page


@pytest.fixture
def other_origin(tmp_path: Path) -> Iterator[str]:
    """Another program's page on this machine (http://localhost:PORT): a real loopback server,
    so Chromium's own local-network checks let its requests through and only CORS remains."""
    (tmp_path / "index.html").write_text("<title>elsewhere</title>")

    class Page(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args, directory=str(tmp_path))

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    server.daemon_threads = False
    thread = threading.Thread(target=server.serve_forever, name="other-origin")
    thread.start()
    try:
        yield f"http://localhost:{server.server_address[1]}/index.html"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_page_of_another_origin_reads_and_writes_nothing(
    page: Page, page_errors: list[str], collector_factory: Any, other_origin: str
) -> None:
    collector = collector_factory()
    page.goto(other_origin)
    read = page.evaluate(
        """async (url) => {
            try { const r = await fetch(url + "/api/v1/runs"); return "read " + r.status; }
            catch (e) { return "refused: " + e.name; }
        }""",
        collector.url,
    )
    assert read == "refused: TypeError"
    blind = page.evaluate(
        """async (url) => {
            const body = JSON.stringify({matchers: ["node=n1"], duration_s: 60});
            const r = await fetch(url + "/api/v1/silences", {method: "POST", mode: "no-cors",
                headers: {"Content-Type": "text/plain"}, body});
            return r.type;
        }""",
        collector.url,
    )
    assert blind == "opaque"  # the browser sent it; the collector must have refused it
    assert httpx.get(f"{collector.url}/api/v1/silences", params={"all": 1}).json() == []
    assert any("No 'Access-Control-Allow-Origin' header" in e for e in page_errors), page_errors
    assert any("403" in e for e in page_errors), page_errors
    page_errors.clear()


def test_the_collector_page_may_call_its_own_api(page: Page, collector_factory: Any) -> None:
    collector = collector_factory()
    page.goto(f"{collector.url}/")
    made = page.evaluate(
        """async () => {
            const r = await fetch("/api/v1/silences", {method: "POST",
                headers: {"Content-Type": "application/json"},
                body: JSON.stringify({matchers: ["node=n1"], duration_s: 60})});
            return r.status;
        }"""
    )
    assert made in (200, 201)
    assert len(httpx.get(f"{collector.url}/api/v1/silences").json()) == 1
