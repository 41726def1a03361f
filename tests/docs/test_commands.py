"""Every ``stepwatch ...`` command the README shows exists, with the options it shows."""

from __future__ import annotations

import re

import click
import pytest

from stepwatch.cli import main

from ._readme import README, Shown, commands, words

SHOWN = commands(README.read_text())
_NUMBER = re.compile(r"-\d")


def resolve(argv: list[str]) -> tuple[list[str], click.Command, list[str]]:
    """Follow ``argv``'s leading names down the command tree: the path, its command, the rest.

    Raises LookupError for a name that is not a command of its group.
    """
    command: click.Command = main
    path, rest = ["stepwatch"], argv[1:]
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        found = command.get_command(click.Context(command), rest[0])
        if found is None:
            raise LookupError(f"{' '.join(path)} has no command {rest[0]!r}")
        path.append(rest.pop(0))
        command = found
    return path, command, rest


def problems(shown: Shown) -> list[str]:
    """What the command tree says against a shown command: nothing when it exists as shown."""
    argv = words(shown.text)
    try:
        if shown.sibling_of is not None:
            argv = resolve(words(shown.sibling_of))[0][:-1] + argv
        path, command, rest = resolve(argv)
    except LookupError as exc:
        return [str(exc)]
    known = {"-h", "--help"}
    for param in command.params:
        known.update(param.opts, param.secondary_opts)
    options = [w.split("=", 1)[0] for w in rest if w.startswith("-") and not _NUMBER.match(w)]
    return [f"{' '.join(path)} has no option {name}" for name in options if name not in known]


@pytest.mark.parametrize("shown", SHOWN, ids=lambda shown: f"line{shown.line}:{shown.text}")
def test_the_command_exists_with_the_options_shown(shown: Shown) -> None:
    assert problems(shown) == [], f"README.md:{shown.line}: {shown.text}"


def test_every_command_of_the_cli_is_shown() -> None:
    shown = {resolve(words(s.text))[0][1] for s in SHOWN if s.sibling_of is None}
    assert shown == set(main.commands)


def test_a_missing_command_or_option_is_found() -> None:
    assert problems(Shown("stepwatch demo --duration 5 --nope 1", 1)) == [
        "stepwatch demo has no option --nope"
    ]
    assert problems(Shown("stepwatch actions nope ID", 1)) == [
        "stepwatch actions has no command 'nope'"
    ]
    assert problems(Shown("drop ID", 1, "stepwatch silence add MATCHER...")) == [
        "stepwatch silence has no command 'drop'"
    ]
    assert problems(Shown("stepwatch run [--name N] -- python train.py --lr 3", 1)) == []
