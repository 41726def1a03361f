"""`stepwatch forecast` over recorded runs: a run whose loss follows the law of its learning
rate's areas under its stated schedule, at a known pace to a known planned end, forecast as
of a cut from its data up to the cut alone; and its refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from detect.replay.test_recorded import write_scenario

from stepwatch.cli import main
from stepwatch.model import NO_STEP, Run, SampleBatch, SeriesKey
from stepwatch.predict import FINAL_WINDOW, LossLaw, LrSchedule, lr_areas
from stepwatch.store import Store

T0 = 1_780_000_000.0
PLANNED = 1200
STEP_S = 2.0
SCHEDULE = {"type": "linear", "peak_lr": 1e-3, "warmup_steps": 50, "final_lr": 1e-4,
            "total_steps": PLANNED}  # fmt: skip
LAW = LossLaw(l0=2.0, a=0.5, alpha=0.5, c=1.0)
#: From this step on, GPU 0 runs hot (the built-in gpu_thermal rule fires on it).
HOT_FROM = 700
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB"
FIELDS = {"run", "at_step", "planned_total_steps", "eta_s", "eta_s_p10", "eta_s_p90",
          "final_loss_p10", "final_loss_p50", "final_loss_p90", "success_probability",
          "alerts", "reason"}  # fmt: skip


def _truth() -> dict[str, np.ndarray]:
    """Every planned step's time, loss (the law plus noise) and rate."""
    rng = np.random.default_rng(7)
    steps = np.arange(PLANNED)
    lr = LrSchedule.from_config(SCHEDULE).lr(steps)
    s1, s2 = lr_areas(lr)
    loss = LAW.loss(s1, s2) + rng.normal(0.0, 0.01, PLANNED)
    ts = T0 + np.cumsum(rng.normal(STEP_S, 0.05, PLANNED))
    return {"step": steps, "ts": ts, "loss": loss, "lr": lr}


TRUTH = _truth()
FINAL = float(TRUTH["loss"][-FINAL_WINDOW:].mean())
#: How far from the truth a final-loss interval may lie: the law fitted to part of a run
#: overshoots the drop its decay brings (docs/forecast.md), by about 2 % on this run.
SLACK = 0.03 * FINAL


def _holds_the_truth(got: dict[str, Any]) -> bool:
    """The final-loss p10-p90, widened by SLACK, holds the truth; p50 lies within it."""
    low, mid, high = got["final_loss_p10"], got["final_loss_p50"], got["final_loss_p90"]
    return bool(low <= mid <= high and low - SLACK <= FINAL <= high + SLACK)


def _rows(upto: int) -> list[dict[str, Any]]:
    """Steps 0..upto-1 in the scenario layout: rank 1's loss (far above rank 0's, and first),
    rank 0's loss and rate, and GPU 0's temperature every other step."""
    rows: list[dict[str, Any]] = []
    for i in range(upto):
        ts, loss = float(TRUTH["ts"][i]), float(TRUTH["loss"][i])
        rows.append(dict(ts=ts, name="train.loss", value=loss + 5.0, step=i, node="n0", rank=1))
        rows.append(dict(ts=ts, name="train.loss", value=loss, step=i, node="n0", rank=0))
        rows.append(dict(ts=ts, name="train.lr", value=float(TRUTH["lr"][i]), step=i, rank=0))
        if i % 2 == 0:
            hot = 92.0 if i >= HOT_FROM else 60.0
            rows.append(dict(ts=ts, name="gpu.temp_c", value=hot, node="n0", gpu=0))
    for row in rows:
        row["run"] = "law-run"
    return rows


def _recorded(
    root: Path,
    upto: int = PLANNED,
    fmt: str = "parquet",
    logs: list[dict[str, Any]] | None = None,
    **meta: Any,
) -> Path:
    """A recorded run folder of steps 0..upto-1 and these log lines; its plan in labels.json,
    its schedule in run.json (``meta`` replaces run.json's document)."""
    where = write_scenario(root / f"law-{fmt}-{upto}", _rows(upto), fmt, logs=logs or [])
    (where / "labels.json").write_text(
        json.dumps({"run": "law-run", "planned_total_steps": PLANNED})
    )
    (where / "run.json").write_text(json.dumps(meta or {"config": {"lr_schedule": SCHEDULE}}))
    return where


def _forecast(*args: str) -> tuple[int, list[dict[str, Any]], str]:
    result = CliRunner().invoke(main, ["forecast", *args, "--json"])
    lines = result.stdout.splitlines() if result.exit_code == 0 else []
    return result.exit_code, [json.loads(line) for line in lines], result.output


def _eta_truth(at_step: int) -> float:
    return float(TRUTH["ts"][-1] - TRUTH["ts"][at_step])


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_cut_run_is_forecast_from_its_data_up_to_the_cut(tmp_path: Path, fmt: str) -> None:
    code, (got,), _ = _forecast(str(_recorded(tmp_path, fmt=fmt)), "--at", "40%")
    assert code == 0 and FIELDS <= set(got)
    assert got["run"] == "law-run" and got["reason"] is None
    assert got["at_step"] == 480 and got["planned_total_steps"] == PLANNED
    assert got["schedule"] == "stated" and got["basis"] == "schedule"
    assert got["eta_s"] == pytest.approx(_eta_truth(480), rel=0.03)
    assert got["eta_s_p10"] <= got["eta_s"] <= got["eta_s_p90"]
    assert _holds_the_truth(got)


def test_a_step_cuts_there_and_the_last_sample_is_the_default(tmp_path: Path) -> None:
    code, (cut,), _ = _forecast(str(_recorded(tmp_path)), "--at", "600")
    assert code == 0 and cut["at_step"] == 600
    assert cut["eta_s"] == pytest.approx(_eta_truth(600), rel=0.03)
    code, (last,), _ = _forecast(str(_recorded(tmp_path, upto=900)))
    assert code == 0 and last["at_step"] == 899 and last["reason"] is None
    assert last["eta_s"] == pytest.approx(_eta_truth(899), rel=0.05)
    assert _holds_the_truth(cut) and _holds_the_truth(last)
    _, (whole,), _ = _forecast(str(_recorded(tmp_path)))
    assert whole["at_step"] == PLANNED - 1 and whole["eta_s"] is None
    assert whole["reason"] == "the run reached its planned last step"


def test_the_alerts_up_to_the_cut_weigh_on_the_chance_of_success(tmp_path: Path) -> None:
    oom = {"ts": float(TRUTH["ts"][400]), "node": "n0", "rank": 0, "line": OOM}
    calm = str(_recorded(tmp_path / "calm", upto=1000))
    failing = str(_recorded(tmp_path / "oom", upto=1000, logs=[oom]))
    _, (calm_before, before), _ = _forecast(calm, failing, "--at", "350")
    assert before["alerts"] == calm_before["alerts"] == []
    assert before["success_probability"] == calm_before["success_probability"]
    _, (calm_after, after), _ = _forecast(calm, failing, "--at", f"{HOT_FROM - 50}")
    assert after["alerts"] == ["log_oom"] and calm_after["alerts"] == []
    assert 0.0 <= after["success_probability"] < calm_after["success_probability"] <= 1.0
    _, (whole,), _ = _forecast(failing)
    assert whole["alerts"] == ["log_oom", "gpu_thermal"]  # each incident once, however long


def test_a_store_run_forecasts_as_its_folder_does(tmp_path: Path) -> None:
    rows = [r for r in _rows(PLANNED) if r["name"] != "gpu.temp_c"]
    keys = sorted({(r["name"], r["rank"]) for r in rows})
    index = {k: i for i, k in enumerate(keys)}
    batch = SampleBatch(
        "test",
        0,
        [SeriesKey.of(name, {"run": "law-run", "rank": rank}) for name, rank in keys],
        np.array([index[r["name"], r["rank"]] for r in rows], np.uint32),
        np.array([r["ts"] for r in rows]),
        np.array([r.get("step", NO_STEP) for r in rows], np.int64),
        np.array([r["value"] for r in rows]),
    )
    config = {"total_steps": PLANNED, "lr_schedule": SCHEDULE}
    with Store(tmp_path / "s.duckdb") as store:
        store.upsert_run(Run("law-run", config=config))
        store.apply([batch])
    code, (stored,), _ = _forecast(str(tmp_path / "s.duckdb"), "--run", "law-run", "--at", "0.4")
    _, (folder,), _ = _forecast(str(_recorded(tmp_path)), "--at", "40%")
    assert code == 0 and stored["at_step"] == 480
    for field in ("planned_total_steps", "eta_s", "final_loss_p50", "final_loss_p90"):
        assert stored[field] == pytest.approx(folder[field]), field


def test_a_run_without_a_plan_is_answered_with_nulls_and_why(tmp_path: Path) -> None:
    where = _recorded(tmp_path, upto=600)
    (where / "labels.json").unlink()
    (where / "run.json").write_text(json.dumps({"config": {}}))
    for args in ([], ["--at", "30%"]):
        code, (got,), _ = _forecast(str(where), *args)
        assert code == 0 and got["planned_total_steps"] is None
        assert got["eta_s"] is None and got["final_loss_p50"] is None
        assert got["success_probability"] is None
        assert got["reason"].startswith("no planned total steps")


def test_run_json_states_the_plan(tmp_path: Path) -> None:
    where = _recorded(tmp_path, upto=600, config={"total_steps": 2400})
    code, (got,), _ = _forecast(str(where))
    assert code == 0 and got["planned_total_steps"] == 2400 and got["schedule"] is None
    assert got["eta_s"] == pytest.approx((2400 - 600) * STEP_S, rel=0.05)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--at", "lots"], "'lots' is neither a share of the planned steps"),
        (["--at", "0%"], "'0%' is neither"),
        (["--at", "150%"], "'150%' is neither"),
        (["--at", "1.5"], "'1.5' is neither"),
        (["--at", "5000"], "--at 5000: step 5000 is outside the run's train.loss (steps 0 to 599)"),
    ],
)
def test_a_bad_at_is_refused(tmp_path: Path, args: list[str], says: str) -> None:
    code, _, output = _forecast(str(_recorded(tmp_path, upto=600)), *args)
    assert code == 2 and says in output


def test_what_is_no_recorded_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("hello")
    bad_plan = _recorded(tmp_path, upto=100, config={"total_steps": "10k"})
    for path, says in [
        (tmp_path / "empty", "no metrics.parquet or metrics.csv.gz"),
        (tmp_path / "notes.txt", "unknown format"),
        (bad_plan, "config.total_steps: '10k' is not a number of steps"),
    ]:
        code, _, output = _forecast(str(path))
        assert code == 2 and str(path) in output and says in output


def test_the_installed_command_prints_a_json_line_a_run(tmp_path: Path) -> None:
    command = Path(sys.executable).parent / "stepwatch"  # installed beside the interpreter
    where = _recorded(tmp_path)
    done = subprocess.run(
        [str(command), "forecast", str(where), "--at", "50%", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (got,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert got["at_step"] == 600 and got["path"] == str(where)
    assert got["eta_s"] == pytest.approx(_eta_truth(600), rel=0.03)


def test_without_json_a_table_reads_a_row_a_run(tmp_path: Path) -> None:
    where = _recorded(tmp_path, upto=600)
    (where / "labels.json").unlink()
    (where / "run.json").write_text("{}")
    cut = str(_recorded(tmp_path))
    wide = {"COLUMNS": "200"}
    result = CliRunner().invoke(main, ["forecast", cut, str(where), "--at", "480"], env=wide)
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "law-run" in line]
    assert len(rows) == 2 and "480 of 1,200" in rows[0] and "no planned total" in rows[1]
    assert "m " in rows[0].split("480 of 1,200")[1]  # an ETA of minutes


def test_finished_runs_given_as_priors_lend_their_law(tmp_path: Path) -> None:
    cut = _recorded(tmp_path / "cut")
    done = [_recorded(tmp_path / name) for name in ("a", "b")]
    short = _recorded(tmp_path / "short", upto=PLANNED // 2)  # ended before its plan
    code, (alone,), _ = _forecast(str(cut), "--at", "25%")
    assert code == 0 and alone["project_runs"] == 0
    code, (lent,), _ = _forecast(str(cut), "--at", "25%", "--prior", str(done[0]),
                                 "--prior", str(done[1]), "--prior", str(short))  # fmt: skip
    assert code == 0 and lent["project_runs"] == 2
    assert abs(lent["final_loss_p50"] / FINAL - 1) < 0.01
    assert lent["final_loss_p10"] <= FINAL <= lent["final_loss_p90"]
    code, (one,), _ = _forecast(str(cut), "--at", "25%", "--prior", str(done[0]),
                                "--prior", str(short))  # fmt: skip
    assert code == 0 and one["project_runs"] == 0  # one finished run makes no law
