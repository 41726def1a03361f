"""`stepwatch server --analyst URL`'s options: the model incidents are sent to, and its key
(read from a file or the environment, never from the command line, where `ps` shows it)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from ..act import AnalystConfig

__all__ = ["KEY_ENV", "analyst_config", "analyst_options"]

#: The environment variable that may hold the analyst's key itself.
KEY_ENV = "STEPWATCH_ANALYST_KEY"

F = TypeVar("F", bound=Callable[..., Any])


def analyst_options(command: F) -> F:
    """Add the analyst's options (``analyst``, ``analyst_model``, ``analyst_key_file``,
    ``analyst_timeout_s``) to ``command``."""
    for option in reversed(
        (
            click.option(
                "--analyst",
                default=None,
                metavar="URL",
                help="Send each incident's context (its alerts, the run's metrics and log lines "
                "near it, recent actions and commands) to this OpenAI-compatible chat endpoint "
                "(vLLM, llama.cpp, Ollama: http://host:8000/v1) and show its analysis with the "
                "incident, marked as the model's. It never acts: a playbook it names is only "
                "suggested (docs/detection.md).",
            ),
            click.option(
                "--analyst-model",
                default=None,
                metavar="NAME",
                help="The model the --analyst endpoint serves (needed with --analyst).",
            ),
            click.option(
                "--analyst-key-file",
                envvar="STEPWATCH_ANALYST_KEY_FILE",
                default=None,
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                metavar="PATH",
                help="A file holding the --analyst endpoint's API key, sent as a bearer token "
                f"(env STEPWATCH_ANALYST_KEY_FILE; or the key itself in env {KEY_ENV}).",
            ),
            click.option(
                "--analyst-timeout",
                "analyst_timeout_s",
                default=120.0,
                show_default=True,
                type=click.FloatRange(min=0, min_open=True),
                metavar="S",
                help="Seconds the --analyst endpoint may take to answer.",
            ),
        )
    ):
        command = option(command)
    return command


def analyst_config(
    analyst: str | None,
    analyst_model: str | None,
    analyst_key_file: Path | None,
    analyst_timeout_s: float,
) -> AnalystConfig | None:
    """The collector's analyst from the options (None without ``--analyst``); a wrong one is
    a usage error that names no key."""
    if analyst is None:
        if analyst_model is not None or analyst_key_file is not None:
            raise click.UsageError("--analyst-model and --analyst-key-file need --analyst URL")
        return None
    if not analyst_model:
        raise click.UsageError("--analyst needs --analyst-model NAME: the model to ask")
    from ..act import AnalystConfig

    if analyst_key_file is not None:
        key = analyst_key_file.read_text(encoding="utf-8").strip()
    else:
        key = os.environ.get(KEY_ENV, "").strip()
    try:
        return AnalystConfig(analyst, analyst_model, key, timeout_s=analyst_timeout_s)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--analyst") from None
