"""CollectorOptions: one object for every setting, checked when made, read by every entry."""

from __future__ import annotations

from pathlib import Path

import httpx
import psutil
import pytest
from click.testing import CliRunner

from stepwatch.cli import main
from stepwatch.server import CollectorOptions, ServerThread, store_memory_limit
from stepwatch.store import Store


def test_a_wrong_value_fails_when_the_options_are_made() -> None:
    with pytest.raises(ValueError, match="checkpoint interval must be above 0 s: 0"):
        CollectorOptions(checkpoint_interval_s=0)
    with pytest.raises(ValueError, match="upkeep interval must be above 0 s: -1"):
        CollectorOptions(upkeep_interval_s=-1)
    with pytest.raises(ValueError):
        CollectorOptions(allowed_hosts=("bad name/",))
    with pytest.raises(ValueError, match="the store needs at least 32 MiB of memory: 1024 bytes"):
        CollectorOptions(store_memory_bytes=1024)


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


def test_the_store_holds_its_memory_to_the_limit_the_command_line_gives(tmp_path: Path) -> None:
    """``--store-memory`` in a size or a share of the machine's memory is DuckDB's limit."""
    assert store_memory_limit("96MiB") == 96 << 20
    assert store_memory_limit("50%") == psutil.virtual_memory().total // 2
    options = CollectorOptions(port=0, store_memory_bytes=store_memory_limit("96MiB"))
    with ServerThread(tmp_path / "s.duckdb", options) as s:
        store = s._store
        with store._cursor() as cur:
            ((limit,),) = cur.execute("SELECT current_setting('memory_limit')").fetchall()
    assert limit == "96.0 MiB"
    with Store(tmp_path / "s.duckdb") as default, default._cursor() as cur:
        ((limit,),) = cur.execute("SELECT current_setting('memory_limit')").fetchall()
    assert limit != "96.0 MiB"  # a setting of the connection, not of the file
