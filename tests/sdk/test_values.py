"""What log() accepts as a value, and the errors it raises for everything else."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from stepwatch.sdk._values import as_float, as_step

ACCEPTED = [
    (1, 1.0),
    (2.5, 2.5),
    (-0.0, -0.0),
    (2**60, float(2**60)),
    (np.float32(0.5), 0.5),
    (np.float64(0.25), 0.25),
    (np.int64(7), 7.0),
    (np.array(3.5), 3.5),
    (torch.tensor(1.5), 1.5),
    (torch.tensor(4, dtype=torch.int32), 4.0),
    (torch.tensor([2.0]), 2.0),
    (torch.tensor(0.5, requires_grad=True) * 2, 1.0),
]

REJECTED = [
    True,
    np.bool_(False),
    torch.tensor(True),
    "1.0",
    b"1",
    None,
    [1.0],
    {"a": 1.0},
    (1.0,),
    1 + 2j,
    np.array([1.0, 2.0]),
    torch.ones(2, 2),
    np.complex128(1),
]


@pytest.mark.parametrize(("value", "expected"), ACCEPTED)
def test_numbers_and_one_element_tensors_are_accepted(value: object, expected: float) -> None:
    result = as_float("loss", value)
    assert type(result) is float and result == expected


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float32("nan")])
def test_non_finite_values_are_kept(value: object) -> None:
    result = as_float("loss", value)
    assert math.isnan(result) if math.isnan(float(value)) else result == value  # type: ignore[arg-type]


@pytest.mark.parametrize("value", REJECTED, ids=lambda v: type(v).__name__)
def test_everything_else_is_a_type_error_naming_the_key(value: object) -> None:
    with pytest.raises(TypeError, match="'grad_norm'"):
        as_float("grad_norm", value)


def test_ints_too_large_for_float64_are_refused() -> None:
    with pytest.raises(ValueError, match="too large"):
        as_float("tokens", 10**400)


def test_steps() -> None:
    assert as_step(None) == -1
    assert as_step(5) == 5 and as_step(np.int64(6)) == 6
    with pytest.raises(ValueError):
        as_step(-1)
    for bad in (1.5, "3", True):
        with pytest.raises(TypeError):
            as_step(bad)
