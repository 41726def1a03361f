"""The mapping tables speak our vocabulary and cover what ANOMALIES.md asks of each exporter."""

from __future__ import annotations

import re

import pytest

from stepwatch.collect._exporters import (
    DCGM_EXPORTER,
    DEFAULT_MAPPING,
    NODE_EXPORTER,
    NVIDIA_GPU_EXPORTER,
)
from stepwatch.collect._scrape_rules import Rule
from stepwatch.model import GPU_METRICS, HOST_METRICS, canonical_name

HOST = frozenset(HOST_METRICS)
GPU = frozenset(GPU_METRICS)
STYLE = re.compile(r"[a-z]+\.[a-z0-9_]+")


def produced(table: tuple[Rule, ...]) -> set[str]:
    """The metric names a table's rows can give."""
    names = {getattr(rule, "name", None) for rule in table}
    names |= {getattr(rule, "busiest", None) for rule in table}
    return {name for name in names if name is not None}


@pytest.mark.parametrize(
    ("table", "vocabulary"),
    [(NODE_EXPORTER, HOST), (DCGM_EXPORTER, GPU), (NVIDIA_GPU_EXPORTER, GPU)],
)
def test_each_table_covers_its_part_of_the_vocabulary(
    table: tuple[Rule, ...], vocabulary: set[str]
) -> None:
    assert vocabulary <= produced(table)


def test_every_name_is_storable_and_in_house_style() -> None:
    for name in produced(DEFAULT_MAPPING):
        assert canonical_name(name) == name
        assert STYLE.fullmatch(name), name


def test_gpu_labels_only_ever_become_gpu() -> None:
    for rule in DCGM_EXPORTER + NVIDIA_GPU_EXPORTER:
        assert set(getattr(rule, "labels", {}).values()) <= {"gpu"}, rule
