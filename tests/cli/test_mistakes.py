"""A user's mistakes end in one ``Error:`` line and a non-zero exit, never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from stepwatch.cli import main


def _one_line(code: int, stderr: str) -> str:
    """The single ``Error:`` line of a failed command (asserting it is one and alone)."""
    assert code != 0 and "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    return lines[0]


def _fails(*args: str) -> str:
    """``stepwatch ARGS`` in this process: its error line."""
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return _one_line(result.exit_code, result.stderr)


def _fails_as_a_process(*args: str, cwd: Path, code: int = 1) -> str:
    """``stepwatch ARGS`` as a user runs it, in ``cwd``: its error line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    done = subprocess.run(
        [sys.executable, "-m", "stepwatch.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == code, done.stderr
    return _one_line(done.returncode, done.stderr)


@pytest.mark.parametrize(
    "command",
    [
        ["server", "--port", "0"],
        ["demo", "--port", "0", "--duration", "5"],
        ["run", "--gpu", "none", "--", sys.executable, "-c", "print('never runs')"],
        ["export", "parquet", "r1"],
    ],
    ids=["server", "demo", "run", "export"],
)
def test_a_store_another_collector_holds_says_which_and_how_to_read_it(
    server: Any, command: list[str]
) -> None:
    at = command.index("--") if "--" in command else len(command)
    line = _fails(*command[:at], "--store", str(server.store_path), *command[at:])
    assert f"is in use by another process (PID {server.proc.pid})" in line
    assert f"read it through that collector's API (--server {server.url})" in line
    assert "copy the file" in line


def test_replay_of_a_store_another_collector_holds_says_how_to_read_it(
    server: Any, tmp_path: Path
) -> None:
    out = tmp_path / "alerts.jsonl"
    line = _fails("replay", str(server.store_path), "--run", "r1", "--out", str(out))
    assert f"is in use by another process (PID {server.proc.pid})" in line
    assert f"read it through that collector's API (--server {server.url})" in line
    assert not out.exists()


def test_a_port_in_use_is_said_before_the_store_file_is_made(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        store = tmp_path / "new.duckdb"
        line = _fails("server", "--store", str(store), "--port", str(port))
    assert line == (
        f"Error: cannot listen on 127.0.0.1:{port}: the port is in use (by another "
        "collector?); --port chooses another"
    )
    assert list(tmp_path.iterdir()) == []


def test_an_allowed_host_that_is_a_url_is_refused_before_anything_opens(tmp_path: Path) -> None:
    store = tmp_path / "new.duckdb"
    line = _fails("server", "--store", str(store), "--allowed-host", "https://stepwatch.example/")
    assert line == ("Error: an allowed host is a name or an address, like stepwatch.example.org")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("interval", ["0", "-5"])
def test_a_checkpoint_interval_that_is_no_time_is_refused_before_anything_opens(
    tmp_path: Path, interval: str
) -> None:
    store = tmp_path / "new.duckdb"
    line = _fails("server", "--store", str(store), "--checkpoint-interval", interval)
    assert line == f"Error: the checkpoint interval must be above 0 s: {float(interval)}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--retention", "raw=100d", "the 10s tier (90d) would go before raw samples (100d)"),
        ("--retention", "raw=2weeks", "raw: bad duration '2weeks' (a positive number and a unit"),
        ("--retention", "1m=30d", "unknown key '1m': one of raw, 10s, 300s, events"),
        ("--retention", "300s=30d", "the 300s tier (30d) would go before the 10s tier (90d)"),
        ("--max-store-bytes", "lots", "not a size: 'lots' (bytes, a number with K, M, G or T"),
        ("--max-store-bytes", "150%", "a share of the file system lies in (0, 100]%"),
        ("--store-memory", "lots", "not a size: 'lots' (bytes, a number with KiB, MiB, GiB"),
        ("--store-memory", "0%", "a share of the machine's memory lies in (0, 100]%"),
    ],
)
def test_a_retention_or_disk_cap_mistake_is_refused_before_anything_opens(
    tmp_path: Path, option: str, value: str, said: str
) -> None:
    store = tmp_path / "new.duckdb"
    line = _fails("server", "--store", str(store), option, value)
    assert line.startswith(f"Error: {option} {value}: ") and said in line, line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("program", "code", "said"),
    [
        ("no_such_program_here", 127, "no_such_program_here: command not found"),
        ("./missing.sh", 127, "./missing.sh: no such file"),
        ("./not-executable.sh", 126, "./not-executable.sh: not an executable file"),
    ],
)
def test_a_command_that_cannot_run_exits_as_a_shell_would(
    tmp_path: Path, program: str, code: int, said: str
) -> None:
    (tmp_path / "not-executable.sh").write_text("echo hi\n")
    line = _fails_as_a_process("run", "--gpu", "none", "--", program, cwd=tmp_path, code=code)
    assert line == f"Error: {said}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-executable.sh"]  # nothing made


def _commands_with_server() -> list[list[str]]:
    """The path of every command that takes ``--server``."""
    found = []

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])
        elif any("--server" in p.opts for p in command.params):
            found.append(path)

    walk(main, [])
    return found


def test_the_commands_with_server_are_all_found() -> None:
    paths = [" ".join(p) for p in _commands_with_server()]
    assert {"agent", "run", "sync", "top", "alerts", "silence add", "actions approve"} <= set(paths)


@pytest.mark.parametrize("path", _commands_with_server(), ids=" ".join)
@pytest.mark.parametrize("url", ["127.0.0.1:7070", "localhost:7070"])
def test_a_server_url_without_a_scheme_is_refused(path: list[str], url: str) -> None:
    line = _fails(*path, "--server", url)
    assert line == (
        f"Error: --server {url}: a collector URL starts with http:// or https:// "
        f"(did you mean http://{url}?)"
    )


def test_a_missing_pid_for_the_agent_is_one_line(tmp_path: Path) -> None:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    line = _fails("agent", "--gpu", "none", "--pid", str(done.pid))
    assert line == f"Error: --pid {done.pid}: no such process"


@pytest.mark.parametrize("command", [["agent"], ["run"]], ids=["agent", "run"])
def test_a_log_target_that_cannot_be_is_one_line(tmp_path: Path, command: list[str]) -> None:
    after = ["--", sys.executable, "-c", "pass"] if command == ["run"] else []
    base = [*command, "--gpu", "none", "--dir", str(tmp_path / "spool")]
    log = tmp_path / "nowhere" / "train.log"
    assert _fails(*base, "--log", str(log), *after) == (
        f"Error: --log {log}: no directory {log.parent} to watch it in"
    )
    assert _fails(*base, "--log", str(tmp_path), *after) == (
        f"Error: --log {tmp_path}: a directory, not a log file"
    )
    assert not (tmp_path / "spool").exists()


def test_a_log_file_that_is_not_there_yet_is_waited_for(server: Any, tmp_path: Path) -> None:
    """A job may create its log later; only a directory that is not there is a mistake."""
    result = CliRunner().invoke(
        main,
        ["run", "--server", server.url, "--gpu", "none", "--dir", str(tmp_path / "spool")]
        + ["--log", str(tmp_path / "later.log"), "--", sys.executable, "-c", "pass"],
    )
    assert result.exit_code == 0, result.output


def test_keep_serving_with_a_given_server_is_one_line() -> None:
    line = _fails("run", "--server", "http://127.0.0.1:9", "--keep-serving", "--", "true")
    assert line == "Error: --keep-serving is for the collector started without --server"


@pytest.mark.parametrize("command", [["agent"], ["run"]], ids=["agent", "run"])
def test_a_spool_cap_that_is_no_size_is_one_line(tmp_path: Path, command: list[str]) -> None:
    after = ["--", sys.executable, "-c", "pass"] if command == ["run"] else []
    base = [*command, "--gpu", "none", "--dir", str(tmp_path / "spool")]
    assert _fails(*base, "--max-spool", "lots", *after) == (
        "Error: --max-spool lots: not a size: 'lots' (bytes, or a number with KiB, MiB, GiB or TiB)"
    )
    assert not (tmp_path / "spool").exists()
