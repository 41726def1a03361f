"""A web page in the operator's browser cannot use the collector: foreign Host names (DNS
rebinding) and other origins are refused, no CORS header leaves, bodies are bounded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from stepwatch.server._guards import DEFAULT_MAX_JSON_BYTES, HostAllowList

SILENCE = {"matchers": ["node=n1"], "duration_s": 60}


@pytest.fixture(scope="module")
def collector(module_collector_factory: Any) -> Any:
    """One collector for the module, reached as 127.0.0.1 and as stepwatch.example.org."""
    return module_collector_factory(extra_args=("--allowed-host", "stepwatch.example.org"))


def silences(collector: Any) -> list[Any]:
    answer = httpx.get(f"{collector.url}/api/v1/silences", params={"all": 1})
    assert answer.status_code == 200
    return list(answer.json())


def assert_no_cors(response: httpx.Response) -> None:
    assert not [h for h in response.headers if h.lower().startswith("access-control-")]


@pytest.mark.parametrize("host", ["evil.example", "evil.example:7070", "127.0.0.1.evil.example"])
def test_a_foreign_host_name_is_refused_and_changes_nothing(collector: Any, host: str) -> None:
    headers = {"Host": host}
    read = httpx.get(f"{collector.url}/api/v1/runs", headers=headers)
    assert read.status_code == 421
    assert "--allowed-host" in read.json()["error"]
    write = httpx.post(f"{collector.url}/api/v1/silences", json=SILENCE, headers=headers)
    assert write.status_code == 421
    assert silences(collector) == []


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST:1", "[::1]:7070", "stepwatch.example.org", "127.0.0.1"]
)
def test_loopback_and_allowed_names_are_answered(collector: Any, host: str) -> None:
    answer = httpx.get(f"{collector.url}/api/v1/runs", headers={"Host": host})
    assert answer.status_code == 200


def test_probes_answer_any_host_name(collector: Any) -> None:
    """A kubelet probes by the pod's address; the probes carry no data."""
    for path in ("/healthz", "/readyz"):
        assert httpx.get(f"{collector.url}{path}", headers={"Host": "10.1.2.3"}).is_success


def test_a_cross_origin_request_gets_no_cors_header(collector: Any) -> None:
    page = {"Origin": "http://evil.example"}
    read = httpx.get(f"{collector.url}/api/v1/runs", headers=page)
    assert read.status_code == 403
    assert "cross-origin" in read.json()["error"]
    assert_no_cors(read)
    write = httpx.post(f"{collector.url}/api/v1/silences", json=SILENCE, headers=page)
    assert write.status_code == 403
    assert_no_cors(write)
    assert silences(collector) == []


def test_a_preflight_is_refused(collector: Any) -> None:
    preflight = httpx.options(
        f"{collector.url}/api/v1/silences",
        headers={
            "Origin": f"http://127.0.0.1:{collector.port}",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert preflight.status_code == 403
    assert_no_cors(preflight)


def test_the_own_page_and_operator_names_are_same_origin(collector: Any) -> None:
    own = httpx.get(
        f"{collector.url}/api/v1/runs", headers={"Origin": f"http://127.0.0.1:{collector.port}"}
    )
    assert own.status_code == 200
    assert_no_cors(own)
    proxied = httpx.get(  # behind a proxy that sends its own Host: the operator's name is trusted
        f"{collector.url}/api/v1/runs", headers={"Origin": "https://stepwatch.example.org"}
    )
    assert proxied.status_code == 200
    other_port = httpx.get(  # another program on this machine is another origin
        f"{collector.url}/api/v1/runs", headers={"Origin": "http://localhost:8080"}
    )
    assert other_port.status_code == 403


def big_silence() -> bytes:
    padding = "x" * (DEFAULT_MAX_JSON_BYTES + 1)
    return b'{"matchers": ["node=n1"], "duration_s": 60, "comment": "' + padding.encode() + b'"}'


def test_a_body_over_the_limit_is_refused(collector: Any) -> None:
    body = big_silence()
    declared = httpx.post(
        f"{collector.url}/api/v1/silences",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert declared.status_code == 413
    assert f"{DEFAULT_MAX_JSON_BYTES}-byte limit" in declared.json()["error"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    streamed = httpx.post(
        f"{collector.url}/api/v1/silences",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert streamed.status_code == 413
    assert silences(collector) == []


def test_a_body_within_the_limit_reaches_its_route(collector: Any) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"matchers": ["node=n9"], '
        yield b'"duration_s": 60}'

    made = httpx.post(
        f"{collector.url}/api/v1/silences",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert made.status_code in (200, 201), made.text
    assert [s["matchers"] for s in silences(collector)] == [["node=n9"]]


def test_an_allowed_host_must_be_a_name() -> None:
    with pytest.raises(ValueError, match="allowed host is a name"):
        HostAllowList.of("127.0.0.1", ["http://stepwatch.example.org/"])
    everywhere = HostAllowList.of("0.0.0.0")
    assert everywhere.allows("127.0.0.1:1") and not everywhere.allows("evil.example")
