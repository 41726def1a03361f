"""What real GPU traces hold besides kernels, copies and sets, pinned by small hand-made
events in the shapes Kineto writes: synchronization records on the GPU's rows, CPU ops that
name a stream, a step still open when recording stopped, launches paired with their kernels
by correlation id, kernels launched before the trace began, nanosecond timestamps."""

from __future__ import annotations

import pytest

from stepwatch.trace import analyse_events

from ._traces import gpu, op


def test_synchronization_records_are_not_gpu_time() -> None:
    """CUPTI writes a stream's or the context's synchronizations (`cuda_sync`) on the GPU's
    rows: the host waiting, not the GPU working, so neither busy time nor a kernel."""
    sync = gpu("Stream Sync", 0, 500, cat="cuda_sync")
    events = [
        op("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        gpu("ampere_sgemm_128x64_nn", 100, 200),
        {**sync, "ts": 50, "dur": 900},
        {**gpu("Stream Wait Event", 400, 2, cat="cuda_sync")},
        {**gpu("Context Sync", 950, 40, cat="cuda_sync")},
    ]
    report = analyse_events(events)
    b = report.breakdown
    assert (b.compute, b.comm, b.memcpy) == (pytest.approx(200e-6), 0.0, 0.0)
    assert b.idle == pytest.approx(800e-6)
    assert [k.name for k in report.kernels] == ["ampere_sgemm_128x64_nn"]


def test_a_cpu_op_naming_a_stream_is_not_a_kernel() -> None:
    """torch.compile's generated kernels appear twice: the CPU op that launches one (its
    args name the stream) and the kernel; only the kernel is GPU time."""
    cpu_side = op("triton_poi_fused_add_cos_sin_0", 0, 95.8)
    cpu_side["args"] = {"stream": 0, "kernel_backend": "triton"}
    report = analyse_events([cpu_side, gpu("triton_poi_fused_add_cos_sin_0", 90.5, 1.76)])
    b = report.breakdown
    assert b.compute == pytest.approx(1.76e-6)
    assert [(k.name, k.calls, k.kind) for k in report.kernels] == [
        ("triton_poi_fused_add_cos_sin_0", 1, "compute")
    ]


def test_a_step_still_open_when_recording_stopped_ends_with_the_recording() -> None:
    """A trace may keep a step that had not ended when the profiler stopped, with an end far
    past the profiler's own span of the recording (cat `Trace`): the step, and the GPU's
    idle time, end with the recording."""
    recording = {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                 "tid": "PyTorch Profiler", "ts": -300, "dur": 1900}  # fmt: skip
    events = [
        op("ProfilerStep#1", 0, 13_336_315.8, cat="user_annotation"),
        op("cudaDeviceSynchronize", 1500, 20, cat="cuda_runtime"),
        gpu("triton_poi_fused_add_cos_sin_0", 1354, 1.8),
    ]
    b = analyse_events([*events, recording]).breakdown
    assert b.span_s == pytest.approx(1600e-6)
    assert b.idle == pytest.approx((1600 - 1.8) * 1e-6)
    # a step that ended within the recording keeps its end
    closed = analyse_events([{**events[0], "dur": 1550}, *events[1:], recording]).breakdown
    assert closed.span_s == pytest.approx(1550e-6)


def test_launch_delay_is_from_the_call_returning_to_its_kernel_starting() -> None:
    """Launches pair with their kernels by correlation id, with no flow events needed (older
    traces have none, or name them otherwise); the delay runs from the launch call's end,
    none when the kernel began before the call returned; copies and syncs are not kernel
    launches."""
    events = [
        gpu("Memcpy HtoD (Pinned -> Device)", 30, 10, cat="gpu_memcpy", correlation=1),
        op("cudaMemcpyAsync", 0, 8, cat="cuda_runtime", correlation=1),
        gpu("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100, 50, correlation=3),  # first
        op("cudaLaunchKernel", 40, 10, cat="cuda_runtime", correlation=2),
        gpu("ampere_sgemm_128x64_nn", 44, 30, correlation=2),  # before the call returned
        op("hipExtModuleLaunchKernel", 60, 10, cat="cuda_runtime", correlation=3),
        gpu("Stream Sync", 150, 5, cat="cuda_sync", correlation=4),
        op("cudaStreamSynchronize", 140, 15, cat="cuda_runtime", correlation=4),
        op("cudaLaunchKernel", 200, 5, cat="cuda_runtime", correlation=5),  # kernel unseen
    ]
    launches = analyse_events(events).launches
    assert launches is not None
    assert (launches.launches, launches.kernels, launches.delay_matched) == (3, 2, 2)
    assert launches.delay_mean_us == pytest.approx((0 + 30) / 2)
    assert launches.delay_max_us == pytest.approx(30)


def test_kernels_launched_before_the_trace_began_are_gpu_time() -> None:
    """At the start of a trace the GPU may still run kernels launched before recording
    began (no launch in the file): they are counted, since the GPU was busy with them."""
    events = [
        op("ProfilerStep#5", 0, 1000, cat="user_annotation"),
        gpu("void multi_tensor_apply_kernel<AdamFunctor>", 0, 300, correlation=99),
        op("cudaLaunchKernel", 310, 5, cat="cuda_runtime", correlation=100),
        gpu("ampere_sgemm_128x64_nn", 320, 200, correlation=100),
    ]
    report = analyse_events(events)
    assert report.breakdown.compute == pytest.approx(500e-6)
    assert report.breakdown.idle == pytest.approx(500e-6)
    assert report.launches is not None
    assert (report.launches.kernels, report.launches.delay_matched) == (2, 1)


def test_nanosecond_timestamps_are_kept() -> None:
    """Kineto writes times with nanosecond decimals; they are not rounded to microseconds
    (rounding 1.76 µs kernels inward would lose most of them)."""
    base = 2_413_669_097_444.592
    events = [
        gpu("triton_poi_fused_0", base, 1.76, stream=7),
        gpu("triton_poi_fused_1", base + 1.761, 0.9, stream=7),
        gpu("Memcpy DtoD (Device -> Device)", base + 1.5, 0.75, cat="gpu_memcpy", stream=9),
    ]
    b = analyse_events(events).breakdown
    # a float keeps ~16 digits: at this epoch, nanoseconds to within a few tenths
    assert b.compute == pytest.approx(2.66e-6, abs=5e-10)
    assert b.memcpy == pytest.approx(0.001e-6, abs=5e-10)  # only the gap between the two
    assert b.idle == pytest.approx(0.0, abs=5e-10)


def test_kernels_overlapping_on_several_streams_are_counted_once() -> None:
    """Three streams at once: compute is the union of the compute kernels, communication
    the part of the NCCL kernels outside it, and the overlap share is of communication."""
    events = [
        gpu("sm90_xmma_gemm_bf16", 0, 100, stream=7),
        gpu("flash_fwd_kernel", 50, 100, stream=20),  # overlaps the GEMM by 50
        gpu("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", 120, 80, stream=30),
    ]
    report = analyse_events(events)
    b = report.breakdown
    assert b.compute == pytest.approx(150e-6)
    assert b.comm == pytest.approx(50e-6)
    assert b.idle == pytest.approx(0.0)
    assert report.overlap is not None
    assert report.overlap.share == pytest.approx(30 / 80)


def test_a_timeline_span_is_named_by_the_analysis_rules() -> None:
    """The trace view colours spans by these kinds: RCCL's kernels are communication as NCCL's
    are, a CPU copy op is a memory copy, a launch is the runtime."""
    from stepwatch.trace import span_kind

    assert span_kind("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "kernel") == "comm"
    assert span_kind("rcclKernel_AllReduce", "kernel") == "comm"
    assert span_kind("nccl:all_reduce", "user_annotation") == "comm"
    assert span_kind("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy") == "memcpy"
    assert span_kind("aten::copy_", "cpu_op") == "memcpy"
    assert span_kind("ampere_sgemm_128x64_tn", "kernel") == "kernel"
    assert span_kind("ProfilerStep#3", "user_annotation") == "step"
    assert span_kind("cudaLaunchKernel", "cuda_runtime") == "runtime"
    assert span_kind("aten::addmm", "cpu_op") == "cpu"
