"""A run's forecast as the API answers it: every field present, null where nothing is known,
and a schedule stated wrongly said in words rather than failing the answer."""

from __future__ import annotations

import numpy as np

from stepwatch.predict import Series, forecast_run

FIELDS = {"at_step", "planned_total_steps", "schedule", "schedule_error", "eta_s", "eta_s_p10",
          "eta_s_p90", "naive_eta_s", "step_s", "final_loss_p10", "final_loss_p50",
          "final_loss_p90", "basis", "loss_cone", "success_probability",
          "project_runs"}  # fmt: skip


def _loss(n: int) -> Series:
    steps = np.arange(n)
    return Series(steps, 1e9 + steps * 0.5, 2.0 + 3.0 / np.sqrt(steps + 1))


def test_every_field_is_there_and_null_without_a_loss_or_a_plan() -> None:
    for loss, planned in [(None, 1000), (_loss(100), None), (_loss(5), 1000)]:
        got = forecast_run(loss, None, planned, {})
        assert set(got) == FIELDS
        assert got["eta_s"] is None and got["final_loss_p50"] is None and got["project_runs"] == 0


def test_a_schedule_that_is_no_mapping_is_said_and_the_loss_still_forecast() -> None:
    got = forecast_run(_loss(300), None, 1000, {"lr_schedule": "cosine"})
    assert got["schedule_error"] == "lr_schedule: expected a mapping, got str"
    assert got["basis"] == "steps" and got["final_loss_p50"] is not None
    assert got["eta_s"] is not None and got["at_step"] == 299


def test_the_cone_runs_from_the_last_step_seen_to_the_plan_s_end_and_holds_the_median() -> None:
    got = forecast_run(_loss(300), None, 1000, {})
    cone = got["loss_cone"]
    assert cone["step"][0] == 299 and cone["step"][-1] == 999
    assert all(
        lo <= mid <= hi for lo, mid, hi in zip(cone["p10"], cone["p50"], cone["p90"], strict=True)
    )
    truth = 2.0 + 3.0 / np.sqrt(1000)  # the curve's own value at the end
    assert abs(cone["p50"][-1] - truth) < 0.02
    assert cone["p50"][0] > cone["p50"][-1]  # it keeps falling
