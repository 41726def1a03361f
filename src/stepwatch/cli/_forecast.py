"""`stepwatch forecast`: the forecast of recorded runs (when each reaches its planned last step,
where its loss lands, how likely it is to succeed), as of their last sample or an earlier
point, from their data alone."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ._recorded_forecast import At

from ._base import _clear_errors, main


class _Refused(click.ClickException):
    """A path that is no recorded run, or a point outside it: a usage mistake (exit code 2)."""

    exit_code = 2


class _AtType(click.ParamType):
    """``--at``: a share of the planned steps (30%, 0.3) or a step (1200)."""

    name = "FRACTION|STEP"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> At:
        from ._recorded_forecast import At

        try:
            return At.parse(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


@contextmanager
def _refused() -> Iterator[None]:
    """What a recording or ``--at`` gets wrong is said in one line, exit code 2."""
    from ..detect import RecordingError
    from ._recorded_forecast import BadCut

    try:
        yield
    except (RecordingError, BadCut) as exc:
        raise _Refused(str(exc)) from None


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--run", "run_id", default=None, help="The run to forecast from a store file.")
@click.option(
    "--at",
    type=_AtType(),
    default=None,
    help="Forecast as of an earlier point, from the data up to it alone: a share of the "
    "planned steps (30%, 0.3) or a step (1200). Default: the last sample.",
)
@click.option(
    "--prior",
    "priors",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="A finished run of the same project (scenario folder or Parquet export; repeat it): "
    "the law of two or more lends the forecasts its shape (project_runs says so).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object a run, a line each.")
def forecast(
    paths: tuple[Path, ...],
    run_id: str | None,
    at: At | None,
    priors: tuple[Path, ...],
    as_json: bool,
) -> None:
    """Forecast recorded PATHS (scenario folders, Parquet exports, a store file with --run):
    ETA to the planned last step, final loss (mean of the last 50 planned steps) with its
    p10-p90, and the probability of success given the alerts the built-in rules raise."""
    from ..detect import builtin_rules
    from ._recorded_forecast import forecast_recorded, project_law

    rules = builtin_rules()
    with _clear_errors(), _refused():  # every run first: a mistake in one prints nothing
        law = project_law(priors) if priors else None
        answers = [forecast_recorded(p, rules, run=run_id, at=at, prior=law) for p in paths]
    if as_json:
        for answer in answers:
            click.echo(json.dumps(answer, allow_nan=False))  # as the API: never a bare NaN
        return
    from rich.console import Console

    Console().print(_table(answers))


def _table(answers: list[dict[str, Any]]) -> Any:
    """The forecasts as people read them: a row a run; the alerts and why-none columns only
    when a run has some."""
    from ._tables import titled_table

    cells = {
        "run": [a["run"] for a in answers],
        "at step": [_step(a) for a in answers],
        "ETA (p10-p90)": [_eta(a) for a in answers],
        "final loss (p10-p90)": [_loss(a) for a in answers],
        "success": [_share(a.get("success_probability")) for a in answers],
        "alerts": [", ".join(a["alerts"]) for a in answers],
        "why none": [a["reason"] or "" for a in answers],
    }
    shown = {k: v for k, v in cells.items() if k not in ("alerts", "why none") or any(v)}
    table = titled_table("Forecasts", list(shown))
    for row in zip(*shown.values(), strict=True):
        table.add_row(*row)
    return table


def _step(a: Mapping[str, Any]) -> str:
    at = "" if a["at_step"] is None else f"{a['at_step']:,}"
    return at + ("" if a["planned_total_steps"] is None else f" of {a['planned_total_steps']:,}")


def _share(p: float | None) -> str:
    return "" if p is None else f"{p:.0%}"


def _eta(a: Mapping[str, Any]) -> str:
    from .._text import format_duration

    if a["eta_s"] is None:
        return ""
    low, high = format_duration(a["eta_s_p10"]), format_duration(a["eta_s_p90"])
    return f"{format_duration(a['eta_s'])} ({low}-{high})"


def _loss(a: Mapping[str, Any]) -> str:
    if a["final_loss_p50"] is None:
        return ""
    return f"{a['final_loss_p50']:.4g} ({a['final_loss_p10']:.4g}-{a['final_loss_p90']:.4g})"
