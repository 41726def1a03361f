"""A container's command line through the real ``stepwatch`` click parser, as the process would
start with it, and the options its command would run with (captured before anything opens)."""

from __future__ import annotations

import os
from typing import Any

import click
import pytest

from stepwatch.cli import main

from ._manifests import CommandLine


def command_of(argv: list[str]) -> tuple[click.Command, list[str], list[str]]:
    """The command ``argv`` names under ``stepwatch`` (groups followed), its path and the rest."""
    assert argv[0] == "stepwatch", f"{argv[0]} is not the stepwatch program"
    command: click.Command = main
    path, rest = ["stepwatch"], argv[1:]
    while isinstance(command, click.Group):
        assert rest, f"{' '.join(path)} needs a command"
        found = command.get_command(click.Context(command), rest[0])
        assert found is not None, f"{' '.join(path)} has no command {rest[0]!r}"
        path.append(rest.pop(0))
        command = found
    return command, path, rest


def parse(line: CommandLine, monkeypatch: pytest.MonkeyPatch) -> click.Context:
    """The context click makes of ``line`` in ``line.env`` (and no other STEPWATCH_ variable):
    an unknown option or a value an option refuses raises click's error."""
    for name in [n for n in os.environ if n.startswith("STEPWATCH_")]:
        monkeypatch.delenv(name)
    for name, value in line.env.items():
        monkeypatch.setenv(name, value)
    command, path, rest = command_of(line.argv)
    parent = click.Context(main, info_name="stepwatch")
    return command.make_context(path[-1], rest, parent=parent)


def unread_env(line: CommandLine) -> set[str]:
    """STEPWATCH_ variables the container sets that no option of its command reads: a typo."""
    command = command_of(line.argv)[0]
    read = set()
    for param in command.params:
        envvar = getattr(param, "envvar", None)
        read |= {envvar} if isinstance(envvar, str) else set(envvar or ())
    return {n for n in line.env if n.startswith("STEPWATCH_")} - read


class Captured(Exception):
    """Raised in place of what would start serving: carries what it was given."""

    def __init__(self, *given: Any) -> None:
        super().__init__("captured")
        self.given = given


def capture(*args: Any, **kwargs: Any) -> Any:
    raise Captured(*args)


def run_until_start(line: CommandLine, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    """Run the command as the container would, up to the call that starts it (``serve`` of the
    collector, ``open_agent`` of the agent), and return that call's arguments."""
    monkeypatch.setattr("stepwatch.server.serve", capture)
    monkeypatch.setattr("stepwatch.collect.open_agent", capture)
    ctx = parse(line, monkeypatch)
    with ctx, pytest.raises(Captured) as got:
        ctx.command.invoke(ctx)
    return got.value.given
