"""`stepwatch token`: made on a store before its collector starts (the token as the last line),
listed without secrets, revoked; through a running collector with an admin token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from stepwatch.cli import main


def _ok(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_token_made_on_a_store_opens_the_collector_started_on_it(
    collector_factory: Any,
) -> None:
    collector = collector_factory(auth=True)
    collector.stop()  # a store no collector holds
    store = str(collector.store_path)
    said = _ok("token", "create", "--store", store, "--project", "nlp", "--role", "viewer")
    secret = said.splitlines()[-1]
    listed = _ok("token", "list", "--store", store)
    assert "viewer" in listed and "nlp" in listed and secret not in listed
    collector.start()
    bearer = {"Authorization": f"Bearer {secret}"}
    assert httpx.get(collector.url + "/api/v1/runs", headers=bearer).json() == []
    assert httpx.get(collector.url + "/api/v1/runs").status_code == 401


def test_through_the_api_an_admin_makes_and_revokes_tokens(collector_factory: Any) -> None:
    collector = collector_factory(auth=True)
    api = ("--server", collector.url, "--token", collector.token)
    said = _ok("token", "create", *api, "--project", "cv", "--role", "ingest", "--name", "n1")
    secret = said.splitlines()[-1]
    assert "token n1" in said and secret.startswith("swt_")
    assert "n1" in _ok("token", "list", *api)
    assert "revoked" in _ok("token", "revoke", *api, "n1")
    bearer = {"Authorization": f"Bearer {secret}"}
    assert httpx.post(collector.url + "/api/v1/runs", json={}, headers=bearer).status_code == 401


def test_mistakes_are_one_line(tmp_path: Path, collector_factory: Any) -> None:
    store = str(tmp_path / "s.duckdb")
    runner = CliRunner()
    bad = runner.invoke(
        main, ["token", "create", "--store", store, "--project", "a b", "--role", "viewer"]
    )
    assert bad.exit_code == 1 and bad.stderr.strip() == (
        "Error: invalid project name 'a b': letters, digits and _ . -"
    )
    gone = runner.invoke(main, ["token", "revoke", "--store", store, "nobody"])
    assert gone.exit_code == 1 and gone.stderr.strip() == "Error: token 'nobody' does not exist"
    collector = collector_factory(auth=True)
    held = runner.invoke(main, ["token", "list", "--store", str(collector.store_path)])
    assert held.exit_code == 1 and "in use by another process" in held.stderr
    assert "--server" in held.stderr
    viewer = ("--server", collector.url, "--token", collector.tokens["viewer", "default"])
    refused = runner.invoke(main, ["token", "list", *viewer])
    assert refused.exit_code == 1 and "HTTP 403" in refused.stderr
