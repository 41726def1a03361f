"""Learning-rate schedules as a run's config states them: each shape's rate at known steps, and
every mistake refused in words that name the field."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import stepwatch.predict as predict
from stepwatch.predict import LrSchedule, ScheduleError

PEAK, FINAL = 1e-3, 1e-4


def _schedule(kind: str, **more: Any) -> LrSchedule:
    config = {"type": kind, "peak_lr": PEAK, "final_lr": FINAL, "total_steps": 1100}
    return LrSchedule.from_config({**config, "warmup_steps": 100, **more})


def test_the_package_exports_what_it_means_to() -> None:
    assert all(hasattr(predict, name) for name in predict.__all__)


@pytest.mark.parametrize(
    ("kind", "more", "at", "rates"),
    [
        ("cosine", {}, [0, 50, 99, 100, 600, 1100, 2000],
         [0.0, PEAK / 2, PEAK * 0.99, PEAK, (PEAK + FINAL) / 2, FINAL, FINAL]),
        ("linear", {}, [100, 350, 600, 1100], [PEAK, PEAK - 0.25 * (PEAK - FINAL),
                                               (PEAK + FINAL) / 2, FINAL]),
        ("wsd", {"decay_start_step": 900}, [100, 899, 900, 1000, 1100],
         [PEAK, PEAK, PEAK, (PEAK + FINAL) / 2, FINAL]),
        ("wsd", {"decay_start_step": 900, "decay_type": "cosine"}, [899, 950, 1000, 1100],
         [PEAK, PEAK - (PEAK - FINAL) * (1 - 0.5 ** 0.5) / 2, (PEAK + FINAL) / 2, FINAL]),
        ("inv_sqrt", {}, [100, 400, 2500], [PEAK, PEAK / 2, PEAK / 5]),
        ("constant", {}, [100, 101, 5000], [PEAK, PEAK, PEAK]),
    ],
)  # fmt: skip
def test_each_shape_gives_its_rate_at_each_step(
    kind: str, more: dict[str, Any], at: list[int], rates: list[float]
) -> None:
    np.testing.assert_allclose(_schedule(kind, **more).lr(np.array(at)), rates, rtol=1e-9)


def test_a_schedule_without_warmup_starts_at_its_peak() -> None:
    cosine = LrSchedule("cosine", PEAK, 1000)
    assert cosine.lr(np.array([0]))[0] == PEAK


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ({"type": "step", "peak_lr": 1.0, "total_steps": 10},
         "lr_schedule.type: 'step' is not one of cosine, linear, wsd, inv_sqrt, constant"),
        ({"type": "cosine", "peak_lr": 1.0}, "lr_schedule.total_steps: missing"),
        ({"type": "cosine", "peak_lr": "high", "total_steps": 10},
         "lr_schedule.peak_lr: 'high' is not a number"),
        ({"type": "cosine", "peak_lr": 0, "total_steps": 10},
         "lr_schedule.peak_lr: must be above 0"),
        ({"type": "cosine", "peak_lr": 1.0, "final_lr": float("nan"), "total_steps": 10},
         "lr_schedule.final_lr: nan is not a rate of 0 or more"),
        ({"type": "cosine", "peak_lr": 1.0, "total_steps": 10, "warmup_steps": 10},
         "lr_schedule.warmup_steps: 10 must lie in [0, total_steps=10)"),
        ({"type": "cosine", "peak_lr": 1.0, "total_steps": 2.5},
         "lr_schedule.total_steps: 2.5 is not a step count"),
        ({"type": "wsd", "peak_lr": 1.0, "total_steps": 10},
         "lr_schedule.decay_start_step: None must lie in [warmup_steps=0, total_steps=10] for a "
         "wsd schedule"),
        ({"type": "cosine", "peak_lr": 1.0, "total_steps": 10, "min_lr": 0},
         "lr_schedule: unknown field 'min_lr' (fields: type, warmup_steps, peak_lr, final_lr, "
         "total_steps, decay_start_step, decay_type)"),
        ({"type": "wsd", "peak_lr": 1.0, "total_steps": 10, "decay_start_step": 5,
          "decay_type": "step"}, "lr_schedule.decay_type: 'step' is not one of linear, cosine"),
    ],
)  # fmt: skip
def test_a_mistake_is_refused_in_words_that_name_the_field(
    config: dict[str, Any], said: str
) -> None:
    with pytest.raises(ScheduleError) as refused:
        LrSchedule.from_config(config)
    assert str(refused.value) == said
