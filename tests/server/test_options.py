"""CollectorOptions: one object for every setting, checked when made, read by every entry."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from stepwatch.cli import main
from stepwatch.server import CollectorOptions, ServerThread


def test_a_wrong_value_fails_when_the_options_are_made() -> None:
    with pytest.raises(ValueError, match="checkpoint interval must be above 0 s: 0"):
        CollectorOptions(checkpoint_interval_s=0)
    with pytest.raises(ValueError, match="upkeep interval must be above 0 s: -1"):
        CollectorOptions(upkeep_interval_s=-1)
    with pytest.raises(ValueError):
        CollectorOptions(allowed_hosts=("bad name/",))


@pytest.mark.parametrize(
    ("host", "auth", "required"),
    [("127.0.0.1", None, False), ("0.0.0.0", None, True), ("::1", None, False),
     ("127.0.0.1", True, True), ("0.0.0.0", False, False)],
)  # fmt: skip
def test_auth_is_required_off_loopback_unless_told(host: str, auth: bool, required: bool) -> None:
    assert CollectorOptions(host=host, auth=auth).requires_auth is required


def test_the_command_line_fills_the_options_the_collector_keeps(tmp_path: Path) -> None:
    """A limit given on the command line is the one a running collector applies."""
    big = {"run": "r", "samples": [{"name": "train.loss", "value": 1.0, "step": 1}] * 400}
    with ServerThread(tmp_path / "s.duckdb", CollectorOptions(port=0, max_body_bytes=2000)) as s:
        refused = httpx.post(f"{s.url}/api/v1/ingest", json=big)
        assert refused.status_code == 413, refused.text
    result = CliRunner().invoke(main, ["server", "--help"])
    assert "--max-body-bytes" in result.output and "--upkeep-interval" in result.output
    bad = CliRunner().invoke(main, ["server", "--store", str(tmp_path / "b.duckdb"),
                                    "--max-body-bytes", "0"])  # fmt: skip
    assert bad.exit_code == 2 and "--max-body-bytes" in bad.output
    assert not (tmp_path / "b.duckdb").exists()
