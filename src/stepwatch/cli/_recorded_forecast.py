"""A recorded run's forecast as of a point in it, from its data up to that point alone: its
loss and learning-rate series (the lowest rank's), its plan and stated schedule, and the
alerts the rules raise over it so far, as a user would have had them then."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..detect import (
    INCIDENT_GAP_S,
    Alert,
    RecordingError,
    RuleSet,
    describe,
    read_recorded,
    replay,
)
from ..model import NO_STEP, SampleBatch
from ..predict import ProjectLaw, Series, finished_curve, fit_project_law, forecast_run, rank_order
from ..store import Store

__all__ = [
    "At",
    "BadCut",
    "Plan",
    "forecast_recorded",
    "incident_kinds",
    "project_law",
    "read_plan",
]

LOSS, LR = "train.loss", "train.lr"
#: The run's metadata a recorded run folder may carry: ``{"config": {...}}``, as the SDK
#: writes it beside its spool.
RUN_FILE = "run.json"
#: What ``forecast_recorded`` answers first, in this order; the forecast's other fields follow.
FIRST = ("run", "path", "at_step", "planned_total_steps", "eta_s", "eta_s_p10", "eta_s_p90",
         "final_loss_p10", "final_loss_p50", "final_loss_p90", "success_probability")  # fmt: skip
NO_PLAN = "no planned total steps (run.json config total_steps or labels.json planned_total_steps)"


class BadCut(ValueError):
    """An ``--at`` that is no point of the run; the message says what the run holds."""


@dataclass(frozen=True, slots=True)
class At:
    """Where a forecast is made as of: a step, or a share of the planned steps (``text`` as
    the user wrote it, for messages)."""

    text: str
    step: int | None = None
    share: float | None = None

    @classmethod
    def parse(cls, text: str) -> At:
        """``30%`` or ``0.3`` (a share of the planned steps), or ``1200`` (a step)."""
        raw = text.strip()
        try:
            if raw.endswith("%"):
                share = float(raw[:-1]) / 100
            elif raw.isdigit():
                return cls(text, step=int(raw))
            else:
                share = float(raw)
        except ValueError:
            share = float("nan")
        if not 0 < share <= 1:
            raise ValueError(
                f"{text!r} is neither a share of the planned steps in (0, 1] (30%, 0.3) "
                "nor a step (1200)"
            )
        return cls(text, share=share)

    def step_in(self, planned: int | None) -> int | None:
        """The step this point is in a run of ``planned`` steps; None for a share without
        a plan."""
        if self.share is None:
            return self.step
        return round(self.share * planned) if planned else None


@dataclass(frozen=True, slots=True)
class Plan:
    """What a recorded run says of itself: its planned steps and config (its schedule)."""

    planned_total_steps: int | None
    config: Mapping[str, Any]


def read_plan(path: Path, run: str | None) -> Plan:
    """The plan of a scenario folder (``run.json``, then ``labels.json``), of a store's run,
    or none (a Parquet export holds samples only)."""
    info = describe(path, run=run)
    if info.format == "store":
        with Store(path) as store:
            got = store.get_run(str(run))
        if got is None:  # a run known by its series alone
            return Plan(None, {})
        config = dict(got.config)
        where = f"{path}: run {run}"
        return Plan(got.planned_total_steps or _steps(config, "config.total_steps", where), config)
    if not (path.is_dir() and (path / RUN_FILE).is_file()):
        return Plan(info.planned_total_steps, {})
    return _run_file(path / RUN_FILE, info.planned_total_steps)


def _run_file(where: Path, labelled: int | None) -> Plan:
    """The plan a folder's run.json states, its planned steps those of labels.json (``labelled``)
    when it states none."""
    try:
        doc = json.loads(where.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RecordingError(f"{where}: not valid JSON: {e}") from e
    config = doc.get("config", {}) if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        raise RecordingError(f'{where}: expected {{"config": {{...}}}}, a mapping')
    stated = _steps(doc, "planned_total_steps", str(where))
    planned = stated or _steps(config, "config.total_steps", str(where)) or labelled
    return Plan(planned, config)


def _steps(doc: Mapping[str, Any], field: str, where: str) -> int | None:
    """The number of steps ``doc`` states under ``field`` (its last dotted part), if any."""
    value = doc.get(field.rpartition(".")[2])
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RecordingError(f"{where}: {field}: {value!r} is not a number of steps")
    return value


class _Speaker:
    """The samples with a step of the series of one metric that speaks for the run, gathered
    chunk by chunk; a series of a lower rank that appears later takes over, so only one
    series is ever held."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.sid: int | None = None
        self.run: str | None = None
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def feed(self, batch: SampleBatch) -> None:
        keys = batch.keys
        mine = (i for i, k in enumerate(keys) if k.name == self.name)
        best = min(mine, key=lambda i: (rank_order(keys[i].label("rank")), i), default=None)
        if best is None:
            return
        if best != self.sid:  # a new key's first samples are in this chunk: nothing is lost
            self.sid, self.run, self._parts = best, keys[best].label("run"), []
        rows = (batch.series == best) & (batch.step != NO_STEP)
        self._parts.append((batch.step[rows], batch.ts[rows], batch.value[rows]))

    def series(self) -> Series | None:
        if self.sid is None:
            return None
        step, ts, value = (np.concatenate(c) for c in zip(*self._parts, strict=True))
        return Series(step, ts, value) if len(step) else None


def _read_series(path: Path, run: str | None) -> tuple[Series | None, Series | None, str | None]:
    """The loss and learning-rate series of a recorded run, in data-time order, and its id."""
    loss, lr = _Speaker(LOSS), _Speaker(LR)
    for chunk in read_recorded(path, run=run):
        loss.feed(chunk.batch)
        lr.feed(chunk.batch)
    return loss.series(), lr.series(), loss.run


def _cut(loss: Series, step: int, at: At) -> tuple[Series, float]:
    """The loss until it first passes ``step``, and the time of its last sample kept."""
    first, last = int(loss.step.min()), int(loss.step.max())
    past = np.flatnonzero(loss.step > step)
    end = int(past[0]) if past.size else len(loss.step)
    if end == 0 or step > last:
        raise BadCut(
            f"--at {at.text}: step {step} is outside the run's train.loss (steps {first} to {last})"
        )
    return _first(loss, end), float(loss.ts[end - 1])


def _first(series: Series, n: int) -> Series:
    return Series(series.step[:n], series.ts[:n], series.value[:n])


def incident_kinds(alerts: Iterable[Alert]) -> list[str]:
    """The kind of each incident among alerts in time order: alerts of one kind about one
    entity, each less than ``INCIDENT_GAP_S`` after the one before, are one incident."""
    last: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    kinds = []
    for alert in alerts:
        key = (alert.kind, tuple(sorted(alert.labels.items())))
        if key not in last or alert.ts - last[key] >= INCIDENT_GAP_S:
            kinds.append(alert.kind)
        last[key] = alert.ts
    return kinds


def project_law(paths: Iterable[Path]) -> ProjectLaw | None:
    """The law of the recorded runs at ``paths`` that reached their planned last step with a
    known rate (stated or seen); None with fewer than two such runs."""
    curves = []
    for path in paths:
        plan = read_plan(path, None)
        loss, lr, _ = _read_series(path, None)
        if loss is not None and plan.planned_total_steps:
            curve = finished_curve(loss, lr, plan.planned_total_steps, plan.config)
            curves.extend([] if curve is None else [curve])
    return fit_project_law(curves)


def forecast_recorded(
    path: Path,
    rules: RuleSet,
    *,
    run: str | None = None,
    at: At | None = None,
    prior: ProjectLaw | None = None,
) -> dict[str, Any]:
    """The forecast of the run recorded at ``path`` as of ``at`` (its last sample if None),
    lent ``prior`` (the law of finished runs like it): every field present, null where nothing
    is known, and ``reason`` saying why when the forecast is null for want of data or a plan
    (a run cut past its data is a ``BadCut``)."""
    plan = read_plan(path, run)
    loss, lr, named = _read_series(path, run)
    head = {"run": run or named or path.name, "path": str(path)}
    planned = plan.planned_total_steps
    step = None if at is None else at.step_in(planned)
    if loss is None or (at is not None and step is None):
        reason = "no train.loss samples with steps" if loss is None else NO_PLAN
        return _answer(head, forecast_run(None, None, planned, plan.config), [], reason)
    until = None
    if at is not None and step is not None:
        loss, until = _cut(loss, step, at)
        lr = None if lr is None else _first(lr, int(np.searchsorted(lr.ts, until, "right")))
    kinds = incident_kinds(replay(path, rules, run=run, until=until))
    answer = forecast_run(loss, lr, planned, plan.config, alerts=kinds, prior=prior)
    return _answer(head, answer, kinds, _why_null(answer))


def _why_null(answer: Mapping[str, Any]) -> str | None:
    planned, at_step = answer["planned_total_steps"], answer["at_step"]
    if not planned:
        return NO_PLAN
    if at_step is not None and at_step >= planned - 1:
        return "the run reached its planned last step"
    if answer["eta_s"] is None and answer["final_loss_p50"] is None:
        return "too few steps seen to forecast from"
    return None


def _answer(
    head: dict[str, Any], answer: Mapping[str, Any], kinds: list[str], reason: str | None
) -> dict[str, Any]:
    out = head | {k: answer.get(k) for k in FIRST if k not in head}
    return out | dict(answer) | {"alerts": kinds, "reason": reason}
