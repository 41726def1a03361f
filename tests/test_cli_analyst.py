"""`stepwatch server --analyst`'s options: the model is needed, the key comes from a file or
the environment and shows in no message, and the analyst's options alone are refused."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from stepwatch.cli import main
from stepwatch.cli._analyst import KEY_ENV, analyst_config

KEY = "sk-from-a-file-99"


def test_the_key_is_read_from_its_file(tmp_path: Path) -> None:
    key_file = tmp_path / "analyst.key"
    key_file.write_text(KEY + "\n")
    config = analyst_config("http://h:8000/v1", "qwen", key_file, 30.0)
    assert config is not None and (config.url, config.model, config.key) == (
        "http://h:8000/v1", "qwen", KEY,
    )  # fmt: skip
    assert config.timeout_s == 30.0 and KEY not in repr(config)


def test_the_key_may_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    config = analyst_config("http://h/v1", "m", None, 120.0)
    assert config is not None and config.key == KEY


def test_without_analyst_there_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    assert analyst_config(None, None, None, 120.0) is None
    with pytest.raises(click.UsageError, match="need --analyst"):
        analyst_config(None, "m", None, 120.0)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--analyst", "http://h/v1"], "--analyst-model"),
        (["--analyst", "h:8000", "--analyst-model", "m"], "http(s)://"),
        (["--analyst-model", "m"], "need --analyst"),
    ],
)
def test_a_wrong_analyst_is_a_usage_error_without_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], said: str
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    result = CliRunner().invoke(main, ["server", "--store", str(tmp_path / "s.duckdb"), *args])
    assert result.exit_code == 2 and said in result.output and KEY not in result.output
    assert not (tmp_path / "s.duckdb").exists()
