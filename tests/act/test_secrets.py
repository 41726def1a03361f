"""Secrets stay secret: a real collector with a token, a Slack URL whose path is the credential
(answering 500 once), a signed webhook with an Authorization header (nobody listening), an SMTP
password (the relay refuses the login) and an Alertmanager URL with userinfo fires an alert;
no API response, no line of its log and nothing in its store holds any of them."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from stepwatch.store import Store

from ._notify_parts import T0, WAIT_S, Recorder, recording_server
from .test_smtp import Inbox

SECRETS = {
    "SLACK_PATH": "T0/B0/slack-path-7c1e-never-shown",
    "HOOK_PATH": "hook-path-4d2b-never-shown",
    "HOOK_SECRET": "hmac-5e8a-never-shown",
    "HOOK_BEARER": "bearer-1a6f-never-shown",
    "SMTP_PASSWORD": "smtp-pw-3b9c-never-shown",
    "AM_PASSWORD": "am-pw-8e2d-never-shown",
}


def _refuse_login(*_: Any) -> AuthResult:
    return AuthResult(success=False, handled=False)


@pytest.fixture
def nobody() -> Iterator[int]:
    """A loopback port held bound but not listening: every connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


@pytest.fixture
def relay(port: int) -> Iterator[int]:
    """An SMTP relay that asks for a login and refuses it."""
    controller = Controller(
        Inbox(),
        hostname="127.0.0.1",
        port=port,
        authenticator=_refuse_login,
        auth_require_tls=False,
    )
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


def _notify_file(path: Path, slack: Recorder, relay: int, nobody: int) -> Path:
    """Every receiver type, each with its secret from the environment, every alert to all."""
    receivers = [
        {"name": "chat", "type": "slack", "url": f"{slack.url}/services/${{SLACK_PATH}}"},
        {
            "name": "hook",
            "type": "webhook",
            "url": f"http://127.0.0.1:{nobody}/${{HOOK_PATH}}",
            "secret": "${HOOK_SECRET}",
            "headers": {"Authorization": "Bearer ${HOOK_BEARER}"},
        },
        {
            "name": "mail",
            "type": "email",
            "smarthost": f"127.0.0.1:{relay}",
            "from": "stepwatch@example.org",
            "to": "oncall@example.org",
            "username": "stepwatch",
            "password": "${SMTP_PASSWORD}",
        },
        {
            "name": "am",
            "type": "alertmanager",
            "url": f"http://am:${{AM_PASSWORD}}@127.0.0.1:{nobody}",
        },
    ]
    for receiver in receivers:
        receiver.update(retries=1, backoff="10ms", max_backoff="20ms", timeout="5s")
    routes = [{"receiver": r["name"], "continue": True} for r in receivers]
    config = {
        "receivers": receivers,
        "route": {"receiver": "chat", "group_wait": "0s", "routes": routes},
    }
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def _every_get(collector: Any) -> dict[str, str]:
    """The text of a GET of every route of the OpenAPI schema (a stream: its first chunk)."""
    headers = collector.headers
    schema = httpx.get(f"{collector.url}/openapi.json", headers=headers, timeout=WAIT_S).json()
    texts = {"/openapi.json": json.dumps(schema)}
    paths = [p for p, ops in schema["paths"].items() if "get" in ops] + ["/docs"]
    assert len(paths) > 10
    with httpx.Client(base_url=collector.url, headers=headers, timeout=WAIT_S) as client:
        for path in paths:
            url = "/".join(
                ("r1" if "run" in part else "x") if "{" in part else part
                for part in path.split("/")
            )
            with client.stream("GET", url, params={"run": "r1"}) as response:
                if response.headers.get("content-type", "").startswith("text/event-stream"):
                    text = next(response.iter_text())
                else:
                    text = response.read().decode(errors="replace")
            assert response.status_code < 500, (path, text)
            texts[path] = text + json.dumps(dict(response.headers))
    return texts


def _leaks(where: str, text: str, secrets: dict[str, str]) -> list[str]:
    return [f"{name} in {where}" for name, secret in secrets.items() if secret in text]


def test_no_secret_in_any_response_log_line_or_stored_record(
    collector_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    relay: int,
    nobody: int,
    loss_doc: Any,
    eventually: Any,
    tmp_path: Path,
) -> None:
    for name, secret in SECRETS.items():
        monkeypatch.setenv(name, secret)  # the collector's environment: ${VAR} in the file
    with recording_server(answers=[500]) as slack:
        notify = _notify_file(tmp_path / "notify.yaml", slack, relay, nobody)
        collector = collector_factory(auth=True, extra_args=("--notify", str(notify)))
        secrets = {**SECRETS, "ADMIN_TOKEN": str(collector.token)}
        secrets |= {f"TOKEN_{r}_{p}": t for (r, p), t in collector.tokens.items()}
        doc = loss_doc(1, "r1", [2.0, "NaN", "NaN"], T0)
        ingest = httpx.post(f"{collector.url}/api/v1/ingest", json=doc, headers=collector.headers)
        assert ingest.status_code == 200, ingest.text

        def audited() -> dict[str, dict[str, Any]] | None:
            events = httpx.get(
                f"{collector.url}/api/v1/events",
                params={"kind": "audit"},
                headers=collector.headers,
            ).json()
            found = {
                e["data"]["actor"]: e["data"] for e in events if e["data"]["action"] == "notify"
            }
            return found if len(found) == 4 else None

        records = eventually(audited)
        texts = _every_get(collector)
        assert len(slack.requests) == 2  # the failed try and the retry reached the real URL
        assert slack.requests[-1].path == f"/services/{SECRETS['SLACK_PATH']}"
    assert records["chat"]["result"] == "ok"
    assert records["chat"]["detail"]["errors"] == [f"{slack.url}/… answered HTTP 500: ok"]
    assert {records[r]["result"] for r in ("hook", "mail", "am")} == {"failed"}
    assert "said 535" in records["mail"]["detail"]["errors"][-1]
    assert collector.stop() == 0
    leaks = [leak for path, text in texts.items() for leak in _leaks(f"GET {path}", text, secrets)]
    leaks += _leaks("the collector's log", collector.log(), secrets)
    with Store(collector.store_path) as store:
        stored = json.dumps(
            [[e.kind, e.text, e.labels, e.data] for e in store.events(limit=100_000)]
        )
    assert "notify" in stored
    leaks += _leaks("the store's events", stored, secrets)
    raw = b"".join(p.read_bytes() for p in collector.store_path.parent.glob("store.duckdb*"))
    leaks += _leaks("the store's files", raw.decode("latin-1"), secrets)
    assert leaks == []
