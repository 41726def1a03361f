"""The README's quick start as a new user runs it: a fresh virtual environment, no extras."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from conftest import Eventually, Processes

from ._readme import README, ROOT, blocks

pytestmark = pytest.mark.slow

INSTALL_S = 900.0
#: Long enough for the checks below, short enough that the demo then stops by itself.
DEMO_S = 25.0
#: The packages that need a framework extra (``[torch]``, ``[huggingface]``, ``[lightning]``...).
NEED_EXTRAS = ("stepwatch.torch", "stepwatch.integrations.")

IMPORT_ALL = """
import pkgutil, sys, stepwatch
skip = tuple(sys.argv[1:])
for info in pkgutil.walk_packages(stepwatch.__path__, "stepwatch."):
    if not info.name.startswith(skip) and not info.name.endswith(".__main__"):
        __import__(info.name)
        print(info.name)
"""


def quick_start_commands() -> list[list[str]]:
    """The commands of the README's first shell block under "Quick start", split at ``&&``."""
    section = README.read_text().split("## Quick start", 1)[1]
    shell = [block for block in blocks(section) if block.lang == "sh"]
    assert shell, "no ```sh block in the quick start"
    return [shlex.split(part) for part in shell[0].text.split("&&")]


def clean_copy(dest: Path) -> Path:
    """The checkout's files as a clone of it holds them (git's, without ignored build output)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def user_env(bin_dir: Path) -> dict[str, str]:
    """The environment of a shell with the fresh venv activated (nothing of the test venv)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="module")
def fresh_bin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A new virtual environment with the quick start's install done in it; its ``bin``."""
    install = quick_start_commands()[0]
    assert install == ["pip", "install", "."], install
    base = tmp_path_factory.mktemp("quickstart")
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True)
    bin_dir = base / "venv" / "bin"
    checkout = clean_copy(base / "checkout")
    pip = [str(bin_dir / "pip"), "install", "-q", *install[2:]]
    done = subprocess.run(
        pip, cwd=checkout, env=user_env(bin_dir), capture_output=True, text=True, timeout=INSTALL_S
    )
    assert done.returncode == 0, done.stderr
    yield bin_dir


def test_every_module_but_the_framework_ones_imports_without_extras(fresh_bin: Path) -> None:
    python = str(fresh_bin / "python")
    done = subprocess.run(
        [python, "-c", IMPORT_ALL, *NEED_EXTRAS],
        env=user_env(fresh_bin),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert {"stepwatch.cli", "stepwatch.detect", "stepwatch.server"} <= set(done.stdout.split())


def api(url: str, path: str, **params: Any) -> Any:
    response = httpx.get(f"{url}{path}", params=params, timeout=10)
    response.raise_for_status()
    return response.json()


def stored_losses(url: str, run: str) -> list[float]:
    """The demo run's ``train.loss`` values the collector stores so far, through the query API."""
    found = api(url, "/api/v1/series", name="train.loss", run=run)
    if not found:
        return []
    values: list[float] = api(url, "/api/v1/query/raw", series=found[0]["id"])["value"]
    return values


def test_the_demo_serves_its_page_and_its_run(
    fresh_bin: Path,
    tmp_path: Path,
    port: int,
    processes: Processes,
    eventually: Eventually,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    demo = quick_start_commands()[1]
    assert demo[:2] == ["stepwatch", "demo"], demo
    for name, value in user_env(fresh_bin).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.chdir(tmp_path)  # where the demo's store goes
    log = tmp_path / "demo.log"
    args = [str(fresh_bin / demo[0]), *demo[1:], "--duration", str(DEMO_S), "--port", str(port)]
    proc = processes.start(args, log)
    printed = eventually(lambda: re.search(r"open (http://\S+) ", log.read_text()) or proc.poll())
    assert isinstance(printed, re.Match), log.read_text()
    link = urlsplit(printed.group(1))
    url = f"{link.scheme}://{link.netloc}"
    run = eventually(lambda: re.search(r"simulating run (\S+):", log.read_text()))
    assert run is not None, log.read_text()
    assert link.fragment == f"/overview?run={run.group(1)}"  # the link opens the run's overview
    page = httpx.get(printed.group(1), timeout=10)
    assert page.status_code == 200 and "<title>stepwatch</title>" in page.text
    assert run.group(1) in [r["id"] for r in api(url, "/api/v1/runs")]
    assert eventually(lambda: stored_losses(url, run.group(1))), log.read_text()
    assert proc.wait(timeout=DEMO_S + 60) == 0, log.read_text()
