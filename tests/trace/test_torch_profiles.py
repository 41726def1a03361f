"""Real torch.profiler traces of small CPU trainings: per-operator self time and calls against
the profiler's own key_averages(), gzip, and memory that stays far below the file's size."""

from __future__ import annotations

import gzip
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from stepwatch.trace import analyse_trace

from ._traces import profile_cpu_model, replicate

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    path = tmp_path_factory.mktemp("trace") / "cpu.json"
    return path, profile_cpu_model(path)


def _assert_matches_key_averages(path: Path, prof: Any, top: int = 20) -> None:
    ours = {o.name: o for o in analyse_trace(path).ops}
    averages = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    assert averages[0].self_cpu_time_total > 0
    assert {e.key for e in averages} == set(ours)
    for event in averages[:top]:
        stat = ours[event.key]
        assert stat.calls == event.count, event.key
        assert stat.self_us == pytest.approx(event.self_cpu_time_total, rel=0.01), event.key
    total = sum(e.self_cpu_time_total for e in averages)
    for event in averages[:top]:  # the share is of all operators' self time, as torch's
        assert ours[event.key].share == pytest.approx(event.self_cpu_time_total / total, rel=0.01)


def test_self_time_and_calls_match_key_averages(profiled: tuple[Path, Any]) -> None:
    _assert_matches_key_averages(*profiled)


def test_with_python_stacks(tmp_path: Path) -> None:
    """Python functions (written after the operators) are timed apart from them; torch's
    tree puts them between operators, which changes only annotations' self time."""
    path = tmp_path / "stack.json"
    prof = profile_cpu_model(path, steps=2, with_stack=True)
    report = analyse_trace(path)
    ours = {o.name: o for o in report.ops if o.kind != "annotation"}
    averages = [e for e in prof.key_averages() if e.key in ours]
    for event in sorted(averages, key=lambda e: -e.self_cpu_time_total)[:20]:
        assert ours[event.key].calls == event.count, event.key
        assert ours[event.key].self_us == pytest.approx(event.self_cpu_time_total, rel=0.01)
    assert report.cpu is not None and report.cpu.python_functions
    assert all(f.self_us >= 0 for f in report.cpu.python_functions)


def test_the_cpu_side_of_a_real_profile(profiled: tuple[Path, Any]) -> None:
    report = analyse_trace(profiled[0])
    b = report.breakdown
    assert (b.basis, report.steps, report.late_events) == ("cpu", 4, 0)
    assert b.compute > 0 and b.idle >= 0
    assert b.compute + b.comm + b.memcpy + b.idle == pytest.approx(b.span_s)
    assert report.cpu is not None and report.cpu.dataloader_s > 0


def test_gzip_trace_reads_the_same(profiled: tuple[Path, Any], tmp_path: Path) -> None:
    packed = tmp_path / "cpu.json.gz"
    with profiled[0].open("rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert analyse_trace(packed).ops == analyse_trace(profiled[0]).ops


def test_memory_stays_far_below_the_file(profiled: tuple[Path, Any], tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    copies = replicate(profiled[0], big, 12 << 20)
    size = big.stat().st_size
    tracemalloc.start()
    try:
        report = analyse_trace(big, chunk_chars=256 << 10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size / 4, f"peak {peak:,} B for a {size:,} B trace"  # json.load: ~5x
    single = {o.name: o.calls for o in analyse_trace(profiled[0]).ops}
    ops = {o.name: o.calls for o in report.ops}
    assert all(ops[name] == calls * copies for name, calls in single.items())
