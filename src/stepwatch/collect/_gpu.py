"""The node agent's GPU source: NVML read every interval, XIDs collected as they happen.

One ``nvmlInit`` when the source opens, handles cached, one ``nvmlShutdown`` on
close. Fast queries run at every read; slow ones (PCIe throughput blocks ~20 ms
per call; NVLink counters) every ``slow_interval_s``. ``nvml`` is the pynvml
module or a FakeNvml, and the same code path serves both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import pynvml

from ..model import Event
from ._fake_nvml import FakeNvml
from ._gpu_device import Device, DeviceReader, ReadOut
from ._gpu_xid import XID_MEANINGS, WaitFailed, XidWatcher
from ._pod_resources import PodResources
from ._pods import Pods
from ._source import Reading

__all__ = ["GpuSource", "GpuUnavailable", "open_gpu"]


class GpuUnavailable(RuntimeError):
    """NVML cannot be used here; ``reason`` says why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GpuSource:
    """Samples every GPU NVML sees, labelled ``{"gpu": index}`` (and, on Kubernetes, the pod it
    is allocated to or else that of the processes on it); meets the Source protocol.

    Args:
        nvml: the ``pynvml`` module, or a ``FakeNvml``.
        interval_s: seconds between reads (the agent's schedule).
        slow_interval_s: seconds between slow queries (PCIe, NVLink).
        node_clock: monotonic seconds; times the slow schedule, rates and XID events.
        xid_wait_ms: how long the XID thread waits per call, which bounds ``close``.
        pods: finds the Kubernetes pod of the processes on each GPU (at each slow read),
            whose labels the GPU's samples then carry.
        pod_resources: the kubelet's pod-resources API, asked at each slow read which pod
            each GPU is allocated to (preferred to ``pods``); closed with the source.

    Raises:
        GpuUnavailable: NVML does not start, or sees no GPU.
    """

    name = "gpu"

    def __init__(
        self,
        nvml: Any,
        *,
        interval_s: float = 1.0,
        slow_interval_s: float = 10.0,
        node_clock: Callable[[], float] = time.monotonic,
        xid_wait_ms: int = 500,
        pods: Pods | None = None,
        pod_resources: PodResources | None = None,
    ) -> None:
        if interval_s <= 0 or slow_interval_s <= 0 or xid_wait_ms <= 0:
            raise ValueError("interval_s, slow_interval_s and xid_wait_ms must be > 0")
        self.interval_s, self.slow_interval_s = interval_s, slow_interval_s
        self._nvml, self._clock = nvml, node_clock
        count, self.driver_version = self._start()
        self._devices = [Device(i, handle=self._handle(i)) for i in range(count)]
        self._pod_resources = pod_resources
        self._reader = DeviceReader(nvml, self.driver_version, pods, pod_resources)
        handles = {d.index: d.handle for d in self._devices if d.handle is not None}
        self._xid = XidWatcher.open(nvml, handles, node_clock, xid_wait_ms)
        for dev in self._devices:
            dev.xid_events = self._xid is not None and dev.index in self._xid.registered
        self._last_slow: float | None = None
        #: Reads that included the slow queries (benchmarks tell fast from slow by it).
        self.slow_reads = 0
        self._closed = False

    @property
    def gpu_count(self) -> int:
        return len(self._devices)

    def _start(self) -> tuple[int, str]:
        """nvmlInit, the GPU count and the driver version; GpuUnavailable when NVML says no."""
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            raise GpuUnavailable(f"NVML did not start: {err}") from err
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as err:
            self._shutdown()
            raise GpuUnavailable(f"NVML cannot count the GPUs: {err}") from err
        if count == 0:
            self._shutdown()
            raise GpuUnavailable("NVML sees no GPU on this machine")
        try:
            return count, str(nvml.nvmlSystemGetDriverVersion())
        except nvml.NVMLError:
            return count, "unknown"

    def _handle(self, index: int) -> Any:
        """The cached handle, or None: the first read retries it and reports why it failed."""
        try:
            return self._nvml.nvmlDeviceGetHandleByIndex(index)
        except self._nvml.NVMLError:
            return None

    def read(self, now: float) -> Reading:
        """Every GPU's samples; XIDs since the last read and error transitions as events."""
        if self._closed:
            raise RuntimeError("read from a closed GpuSource")
        out = ReadOut(now, self._clock())
        slow = self._last_slow is None or (
            out.mono - self._last_slow >= self.slow_interval_s - self.interval_s / 2
        )
        if slow:
            self._last_slow = out.mono
            self.slow_reads += 1
        self._take_xids(out)
        if slow and self._pod_resources is not None:
            self._pod_resources.refresh()
        for dev in self._devices:
            self._reader.read(dev, out, slow)
        return Reading(out.samples, out.events)

    def _take_xids(self, out: ReadOut) -> None:
        """Turn what the XID thread saw into events (stamped when seen) and counts."""
        for seen in self._xid.drain() if self._xid is not None else ():
            ts = out.now - max(0.0, out.mono - seen.at)
            if isinstance(seen, WaitFailed):
                text = f"waiting for GPU XID events failed: {seen.message}"
                data = {"call": "nvmlEventSetWait_v2", "error": seen.error, "message": seen.message}
                out.events.append(Event(ts, "gpu_error", text, {}, data))
                continue
            dev = self._device(seen.gpu)
            meaning = XID_MEANINGS.get(seen.xid)
            gpu = "?" if seen.gpu is None else seen.gpu
            text = f"GPU {gpu}: XID {seen.xid}" + (f" ({meaning})" if meaning else "")
            if dev is not None:
                dev.xid_errors += 1
            labels = dev.labels if dev is not None else {}
            out.events.append(
                Event(ts, "gpu_xid", text, labels, {"gpu": seen.gpu, "xid": seen.xid})
            )

    def _device(self, index: int | None) -> Device | None:
        return (
            self._devices[index] if index is not None and 0 <= index < len(self._devices) else None
        )

    def close(self) -> None:
        """Join the XID thread, free its event set, then one nvmlShutdown; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._xid is not None:
            self._xid.close()
        if self._pod_resources is not None:
            self._pod_resources.close()
        self._shutdown()

    def _shutdown(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass

    def __enter__(self) -> GpuSource:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_gpu(
    spec: str, script: Path | None = None, *, nvml: Any = None, **source_kwargs: Any
) -> tuple[GpuSource | None, str]:
    """The GPU source that ``--gpu SPEC`` asks for, and one line that says what it is.

    Args:
        spec: ``auto`` (NVML where a driver is present; otherwise None and why), ``nvml``
            (NVML, or GpuUnavailable), ``none``, ``fake`` or ``fake:N`` (simulated GPUs).
        script: a JSON script of per-GPU overrides for the fake (``--gpu-script``).
        nvml: the NVML module for ``auto`` and ``nvml``; ``pynvml`` when None.
        source_kwargs: passed on to ``GpuSource``.

    Raises:
        GpuUnavailable: ``nvml`` was asked for and NVML cannot be used.
        ValueError: an unknown spec, a bad fake spec or script, or a script without a fake.
    """
    kind = spec.partition(":")[0]
    if script is not None and kind != "fake":
        raise ValueError(f"a GPU script needs --gpu fake or fake:N, not --gpu {spec}")
    if spec == "none":
        return None, "GPU metrics off (--gpu none)"
    if kind == "fake":
        fake = FakeNvml.from_spec(spec, script)
        return GpuSource(fake, **source_kwargs), f"simulated GPUs: {len(fake.gpus)} ({spec})"
    if spec not in ("auto", "nvml"):
        raise ValueError(f"unknown GPU spec {spec!r}: use auto, nvml, none, fake or fake:N")
    try:
        source = GpuSource(pynvml if nvml is None else nvml, **source_kwargs)
    except GpuUnavailable as err:
        if spec == "nvml":
            raise
        return None, f"no GPU metrics: {err.reason}; use --gpu fake:N to simulate N GPUs"
    return source, f"NVML: {source.gpu_count} GPUs, driver {source.driver_version}"
