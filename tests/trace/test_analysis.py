"""The analysis on hand-written GPU-style traces whose intervals give exact answers:
breakdown, overlap, kernels, launches and each kind of advice."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from stepwatch.trace import analyse_events, analyse_trace

from ._traces import gpu, op, write_trace

#: One step of 600 µs on one GPU: two GEMMs [0,100] and [150,250], an all-reduce [200,400]
#: (50 µs of it under the second GEMM), copies [380,450] and [500,520]; the all-reduce is
#: written after later kernels, as kernels that finish later are. The CPU loads data for 120 µs.
STEP = [
    op("ProfilerStep#1", 0, 600, cat="user_annotation"),
    op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 120,
       cat="user_annotation"),
    gpu("ampere_sgemm_128x64_nn", 0, 100),
    gpu("ampere_sgemm_128x64_nn", 150, 100),
    gpu("Memcpy HtoD (Pageable -> Device)", 380, 70, cat="gpu_memcpy"),
    gpu("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 200, 200, stream=13),
    gpu("Memset (Device)", 500, 20, cat="gpu_memset"),
]  # fmt: skip


def test_breakdown_and_overlap_of_a_known_timeline() -> None:
    report = analyse_events(STEP)
    b = report.breakdown
    assert (b.basis, b.devices, report.steps) == ("gpu", 1, 1)
    assert b.span_s == pytest.approx(600e-6)
    # compute: the GEMMs' union, 200; comm not under compute: [250,400], 150;
    # copies under neither: [400,450] and [500,520], 70; idle: 600 - 420.
    assert b.compute == pytest.approx(200e-6)
    assert b.comm == pytest.approx(150e-6)
    assert b.memcpy == pytest.approx(70e-6)
    assert b.idle == pytest.approx(180e-6)
    assert report.overlap is not None
    assert report.overlap.comm_s == pytest.approx(200e-6)
    assert report.overlap.overlapped_s == pytest.approx(50e-6)
    assert report.overlap.share == pytest.approx(0.25)
    assert report.late_events == 0  # the reorder window sorted the late all-reduce


def test_kernels_by_time_with_kinds_and_the_collectives() -> None:
    report = analyse_events(STEP)
    kernels = {k.name: k for k in report.kernels}
    gemm = kernels["ampere_sgemm_128x64_nn"]
    assert (gemm.self_us, gemm.calls, gemm.kind) == (200, 2, "compute")
    assert gemm.share == pytest.approx(200 / 490)
    assert report.kernels[0].name == "ampere_sgemm_128x64_nn"
    assert kernels["ncclDevKernel_AllReduce_Sum_f32_RING_LL"].kind == "comm"
    assert kernels["Memset (Device)"].kind == "memset"
    assert report.collectives == 1
    assert list(report.collective_us) == [200]


def test_advice_names_its_numbers() -> None:
    advice = {a.kind: a for a in analyse_events(STEP).advice}
    assert set(advice) == {"fuse", "data_bound", "low_overlap"}
    assert advice["fuse"].numbers["share"] == pytest.approx(200 / 600)  # matmul over 30 %
    assert "matmul" in advice["fuse"].message
    idle = advice["data_bound"].numbers  # 120 µs of data loading against 180 µs idle
    assert idle["idle_share"] == pytest.approx(0.3)
    assert idle["dataloader_s"] == pytest.approx(120e-6)
    assert "num_workers" in advice["data_bound"].message
    overlap = advice["low_overlap"].numbers
    assert overlap["overlap_share"] == pytest.approx(0.25)
    assert overlap["comm_share"] == pytest.approx(200 / 600)
    assert "bucket_cap_mb" in advice["low_overlap"].message


def test_tiny_kernels_and_launch_delays() -> None:
    """200 kernels of 4 µs, each starting 15 µs after its 5 µs launch call returned (25 µs
    for one in four), paired with it by correlation id (some kernels come first in the
    file): CUDA graphs are advised."""
    events = []
    for i in range(200):
        launch, delay = 100.0 * i, 30.0 if i % 4 == 0 else 20.0
        call = op("cudaLaunchKernel", launch, 5, cat="cuda_runtime", correlation=i)
        kernel = gpu("void at::native::vectorized_elementwise_kernel<4>", launch + delay, 4,
                     correlation=i)  # fmt: skip
        events += [kernel, call] if i % 2 else [call, kernel]
    report = analyse_events(events)
    launches = report.launches
    assert launches is not None
    assert (launches.launches, launches.kernels, launches.tiny_kernels) == (200, 200, 200)
    assert launches.delay_matched == 200
    assert launches.delay_mean_us == pytest.approx(17.5)
    assert (launches.delay_p50_us, launches.delay_p90_us, launches.delay_max_us) == (15, 25, 25)
    tiny = [a for a in report.advice if a.kind == "tiny_kernels"]
    assert len(tiny) == 1
    assert tiny[0].numbers["tiny_share"] == 1.0
    assert "CUDA graphs" in tiny[0].message


def test_cpu_only_breakdown_is_of_the_training_thread() -> None:
    """Without GPU events the breakdown is the busiest thread's operators, comm and copies
    first (they nest in others), idle what no operator covers."""
    events = [
        op("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        op("aten::linear", 0, 400),
        op("aten::copy_", 100, 50),
        op("c10d::allreduce_", 500, 200),
        op("aten::to", 800, 100),
        op("aten::add", 0, 50, tid=7),  # another, less busy thread
    ]
    report = analyse_events(events)
    b = report.breakdown
    assert (b.basis, b.devices) == ("cpu", 0)
    assert (b.compute, b.comm, b.memcpy, b.idle) == pytest.approx((350e-6, 200e-6, 150e-6, 300e-6))
    assert report.overlap is None and report.launches is None
    assert report.cpu is not None and report.cpu.thread == "100/100"
    assert report.cpu.outside_ops_s == pytest.approx(300e-6)
    assert report.collectives == 1


def test_self_time_and_calls_as_torch_counts_them() -> None:
    """Self time is less direct children; an only child of its parent's name is one call."""
    events = [
        op("aten::sum", 0, 100),
        op("aten::sum", 10, 80),  # only child, same name: merged into its parent
        op("aten::fill_", 20, 30),
        op("aten::mm", 200, 100),
        op("aten::mm", 210, 10),  # two children of the same name: both counted
        op("aten::mm", 230, 10),
    ]
    ops = {o.name: o for o in analyse_events(events).ops}
    assert (ops["aten::sum"].self_us, ops["aten::sum"].calls) == (70, 1)
    assert (ops["aten::fill_"].self_us, ops["aten::fill_"].calls) == (30, 1)
    assert (ops["aten::mm"].self_us, ops["aten::mm"].calls) == (100, 3)
    assert sum(o.share for o in ops.values()) == pytest.approx(1.0)


def test_ranks_metadata_from_the_file(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "r.json", STEP, distributedInfo={"rank": 3, "world_size": 8})
    report = analyse_trace(path)
    assert (report.rank, report.world_size) == (3, 8)
    assert report.to_json()["breakdown"] == {
        "compute": pytest.approx(200e-6), "comm": pytest.approx(150e-6),
        "memcpy": pytest.approx(70e-6), "idle": pytest.approx(180e-6),
    }  # fmt: skip


@pytest.mark.parametrize("compress", [False, True])
def test_bytes_and_a_file_object_are_analysed_as_the_path_is(
    tmp_path: Path, compress: bool
) -> None:
    path = write_trace(tmp_path / "r.json", STEP, distributedInfo={"rank": 3, "world_size": 8})
    if compress:
        path.write_bytes(gzip.compress(path.read_bytes()))
    expected = analyse_trace(path, chunk_chars=64).to_json()
    from_bytes = analyse_trace(path.read_bytes(), chunk_chars=64, name=str(path)).to_json()
    with path.open("rb") as file:
        from_file = analyse_trace(file, chunk_chars=64, name=str(path)).to_json()
    assert from_bytes == from_file == expected
