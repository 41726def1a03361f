"""The spool cap: given, none, or the default from the free space."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from stepwatch.sdk import Run
from stepwatch.spool import DEFAULT_CAP_BYTES, spool_cap

GIB = 1 << 30


def _free(free: int) -> object:
    return lambda path: SimpleNamespace(free=free)


def test_the_default_is_the_smaller_of_2_gib_and_a_tenth_of_the_free_space(tmp_path: Path) -> None:
    where = tmp_path / "not" / "made" / "yet"
    assert spool_cap(None, where, disk_usage=_free(1000 * GIB)) == DEFAULT_CAP_BYTES == 2 * GIB
    assert spool_cap(None, where, disk_usage=_free(5 * GIB)) == GIB // 2
    assert spool_cap(None, where, sharers=8, disk_usage=_free(1000 * GIB)) == GIB // 4


def test_a_given_cap_wins_and_zero_means_none(tmp_path: Path) -> None:
    assert spool_cap(4096, tmp_path, disk_usage=_free(0)) == 4096
    assert spool_cap(0, tmp_path) is None
    with pytest.raises(ValueError, match=">= 0"):
        spool_cap(-1, tmp_path)


def test_an_sdk_run_is_capped_by_default_and_by_its_environment(tmp_path: Path) -> None:
    runs = [
        Run(dir=tmp_path, environ={}, heartbeat_s=None),
        Run(dir=tmp_path, environ={"LOCAL_WORLD_SIZE": "4"}, heartbeat_s=None),
        Run(dir=tmp_path, environ={"STEPWATCH_MAX_SPOOL_BYTES": "64KiB"}, heartbeat_s=None),
        Run(dir=tmp_path, environ={"STEPWATCH_MAX_SPOOL_BYTES": "64KiB"}, max_spool_bytes=0),
    ]
    for run in runs:
        run.finish()
    default = spool_cap(None, tmp_path)
    assert default is not None and 0 < default <= DEFAULT_CAP_BYTES
    caps = [run.max_spool_bytes for run in runs]
    assert caps[0] == pytest.approx(default, rel=0.01)  # free space moves a little meanwhile
    assert caps[1] == pytest.approx(default // 4, rel=0.01)
    assert caps[2:] == [64 << 10, None]
    with pytest.raises(ValueError, match="STEPWATCH_MAX_SPOOL_BYTES: not a size"):
        Run(dir=tmp_path, environ={"STEPWATCH_MAX_SPOOL_BYTES": "lots"})
