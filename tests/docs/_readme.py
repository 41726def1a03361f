"""The README read as the tests check it: its fenced blocks and the commands it shows."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.DOTALL | re.MULTILINE)
#: An inline command, then the sibling commands written after it as `` / `name ARGS` ``.
_INLINE = re.compile(r"`(stepwatch [^`]+)`((?:\s*/\s*`[^`]+`)*)")
_SIBLING = re.compile(r"`([^`]+)`")
_SHELL = ("sh", "bash", "console", "")


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, its text and the README line it starts on."""

    lang: str
    text: str
    line: int


@dataclass(frozen=True)
class Shown:
    """A command as the README writes it; a sibling (``list`` in `` `silence add ...` / `list` ``)
    names the command it follows, whose group it belongs to."""

    text: str
    line: int
    sibling_of: str | None = None


def words(command: str) -> list[str]:
    """A command's words up to ``--`` (what follows is the user's command), brackets removed."""
    split = shlex.split(command.replace("\\|", "|").replace("[", " ").replace("]", " "))
    return split[: split.index("--")] if "--" in split else split


def blocks(text: str) -> list[Block]:
    """Every fenced block of a Markdown text, in order."""
    return [
        Block(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
        for m in _FENCE.finditer(text)
    ]


def _in_blocks(text: str) -> list[Shown]:
    shown = []
    for block in blocks(text):
        if block.lang not in _SHELL:
            continue
        for offset, line in enumerate(block.text.splitlines()):
            for part in re.split(r"&&|\|\||;|\s\|\s", line.split(" #", 1)[0]):
                if part.strip().startswith("stepwatch "):
                    shown.append(Shown(part.strip(), block.line + 1 + offset))
    return shown


def _inline(text: str) -> list[Shown]:
    prose = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    shown = []
    for match in _INLINE.finditer(prose):
        line = prose.count("\n", 0, match.start()) + 1
        first = " ".join(match.group(1).split())
        shown.append(Shown(first, line))
        shown += [Shown(other, line, first) for other in _SIBLING.findall(match.group(2))]
    return shown


def commands(text: str) -> list[Shown]:
    """Every ``stepwatch ...`` command in shell blocks, tables and prose, in order."""
    return sorted(_in_blocks(text) + _inline(text), key=lambda shown: shown.line)
