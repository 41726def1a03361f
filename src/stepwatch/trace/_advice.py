"""Advice from a trace's figures: each item says what to change and the numbers that ask
for it, so a reader can check the reasoning."""

from __future__ import annotations

from collections import defaultdict

from ._names import family, fusion_hint
from ._report import Advice, TraceReport

__all__ = ["FAMILY_SHARE", "IDLE_SHARE", "OVERLAP_SHARE", "TINY_SHARE", "advise"]

#: An operator family above this share of the step is worth a fused kernel.
FAMILY_SHARE = 0.30
#: Kernels: at least this many, this share of them tiny, and CUDA graphs would pay.
TINY_MIN_KERNELS = 100
TINY_SHARE = 0.5
#: Idle time above this share of the step: the GPU (or the thread) waits for data or the CPU.
IDLE_SHARE = 0.10
#: Communication above COMM_SHARE of the step with less than OVERLAP_SHARE of it overlapped.
COMM_SHARE = 0.05
OVERLAP_SHARE = 0.5


def advise(report: TraceReport) -> list[Advice]:
    """Every advice item the report's figures call for, the largest effect first in each kind."""
    return [*_fuse(report), *_tiny(report), *_idle(report), *_overlap(report)]


def _capacity_us(report: TraceReport) -> float:
    """The step's time to fill: its span on every device (or on the training thread)."""
    b = report.breakdown
    return b.span_s * 1e6 * max(b.devices, 1)


def _fuse(report: TraceReport) -> list[Advice]:
    capacity = _capacity_us(report)
    if capacity <= 0:
        return []
    gpu = report.breakdown.basis == "gpu"
    stats = report.kernels if gpu else report.ops
    families: dict[str, float] = defaultdict(float)
    for stat in stats:
        if stat.kind == "compute":
            families[family(stat.name)] += stat.self_us
    out = []
    for fam, self_us in sorted(families.items(), key=lambda item: -item[1]):
        share = self_us / capacity
        if share <= FAMILY_SHARE:
            break
        what = "kernels" if gpu else "operators"
        out.append(Advice(
            "fuse",
            f"{fam} {what} take {share:.0%} of the step ({self_us / 1e6:.3g} s of "
            f"{capacity / 1e6:.3g} s): {fusion_hint(fam)}",
            {"family_s": self_us / 1e6, "step_s": capacity / 1e6, "share": share},
        ))  # fmt: skip
    return out


def _tiny(report: TraceReport) -> list[Advice]:
    launches = report.launches
    if launches is None or launches.kernels < TINY_MIN_KERNELS:
        return []
    if launches.tiny_share < TINY_SHARE:
        return []
    numbers = {
        "tiny_kernels": float(launches.tiny_kernels),
        "kernels": float(launches.kernels),
        "tiny_share": launches.tiny_share,
    }
    delay = ""
    if launches.delay_mean_us is not None:
        numbers["launch_delay_mean_us"] = launches.delay_mean_us
        delay = f", {launches.delay_mean_us:.1f} µs from launch to start on average"
    if report.steps:
        numbers["kernels_per_step"] = launches.kernels / report.steps
    return [Advice(
        "tiny_kernels",
        f"{launches.tiny_kernels:,} of {launches.kernels:,} kernels ({launches.tiny_share:.0%}) "
        f"run under {launches.tiny_under_us:g} µs{delay}: CUDA graphs (torch.compile "
        f"mode='reduce-overhead', torch.cuda.graphs) launch them as one, and torch.compile "
        f"fuses many into fewer",
        numbers,
    )]  # fmt: skip


def _idle(report: TraceReport) -> list[Advice]:
    capacity = _capacity_us(report)
    b = report.breakdown
    if capacity <= 0 or b.idle * 1e6 / capacity < IDLE_SHARE:
        return []
    share = b.idle * 1e6 / capacity
    data_s = report.cpu.dataloader_s if report.cpu else 0.0
    outside_s = report.cpu.outside_ops_s if report.cpu else 0.0
    numbers = {"idle_s": b.idle, "idle_share": share, "dataloader_s": data_s,
               "outside_ops_s": outside_s}  # fmt: skip
    where = "the GPUs are idle" if b.basis == "gpu" else "the training thread is outside operators"
    per_device_idle = b.idle / max(b.devices, 1)
    if data_s >= 0.5 * per_device_idle:
        why = (f"data loading takes {data_s:.3g} s of it: more DataLoader workers "
               f"(num_workers), pin_memory=True and prefetching keep batches ready")  # fmt: skip
        kind = "data_bound"
    else:
        why = (f"data loading explains {data_s:.3g} s; the rest is the CPU ({outside_s:.3g} s "
               f"outside operators: Python, synchronisation, launches): CUDA graphs or "
               f"torch.compile, fewer .item()/host syncs, a larger batch")  # fmt: skip
        kind = "cpu_bound"
    return [Advice(kind, f"{where} {share:.0%} of the step ({b.idle:.3g} s): {why}", numbers)]


def _overlap(report: TraceReport) -> list[Advice]:
    overlap = report.overlap
    capacity = _capacity_us(report)
    if overlap is None or overlap.share is None or capacity <= 0:
        return []
    comm_share = overlap.comm_s * 1e6 / capacity
    if comm_share < COMM_SHARE or overlap.share >= OVERLAP_SHARE:
        return []
    return [Advice(
        "low_overlap",
        f"communication takes {overlap.comm_s:.3g} s ({comm_share:.0%} of the step) and only "
        f"{overlap.share:.0%} of it overlaps compute: smaller DDP buckets (bucket_cap_mb) start "
        f"all-reduces earlier in the backward pass; with FSDP, backward_prefetch and "
        f"forward_prefetch start the next all-gather during compute",
        {"comm_s": overlap.comm_s, "comm_share": comm_share, "overlap_share": overlap.share},
    )]  # fmt: skip
