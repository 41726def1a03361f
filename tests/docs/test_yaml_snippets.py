"""Every YAML file the README shows (rules, policies, notifications, playbooks) is valid as
written: each goes through the parser the collector reads that kind of file with."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from stepwatch.act import parse_notify_config, parse_playbooks
from stepwatch.detect import DETECTORS, parse_rules

from ._readme import README, Block, blocks

SNIPPETS = [block for block in blocks(README.read_text()) if block.lang == "yaml"]


def _rules(text: str, source: str, base: Path) -> object:
    return parse_rules(text, source, DETECTORS)


def _notify(text: str, source: str, base: Path) -> object:
    """``${VAR}`` as a deployment would set it: every variable the file names has a value (a URL
    where its name says so)."""
    names = re.findall(r"\$\{(\w+)\}", text)
    env = {n: "https://hooks.example/x" if n.endswith("_URL") else "s3cret" for n in names}
    return parse_notify_config(text, source, env)


def _playbooks(text: str, source: str, base: Path) -> object:
    return parse_playbooks(text, source, base)


#: The parser of a file, by the top-level key that tells its kind.
PARSERS: dict[str, Callable[[str, str, Path], object]] = {
    "groups": _rules,
    "policies": _rules,
    "receivers": _notify,
    "playbooks": _playbooks,
}


def kind_of(block: Block) -> str:
    """The file's kind: the first of its top-level keys that names one."""
    keys = list(yaml.safe_load(block.text))
    kinds = [key for key in keys if key in PARSERS]
    assert kinds, f"README.md:{block.line}: a YAML file of no known kind (keys {keys})"
    return kinds[0]


def test_the_readme_shows_each_kind_of_file() -> None:
    assert {PARSERS[kind_of(block)] for block in SNIPPETS} == set(PARSERS.values())


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda block: f"line{block.line}")
def test_the_yaml_file_is_valid_as_written(snippet: Block, tmp_path: Path) -> None:
    PARSERS[kind_of(snippet)](snippet.text, f"README.md:{snippet.line}", tmp_path)
