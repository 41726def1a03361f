"""A scriptable stand-in for the ``pynvml`` module, for machines (and tests) without a GPU.

Same function names, signatures, return structures, constants and exceptions as
nvidia-ml-py: constants and ``NVMLError`` come from ``pynvml`` itself (importing
it loads no driver), answers are pynvml's own ctypes structures where NVML
returns one, so code written against the fake runs unchanged on the real module.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

from ._fake_nvml_gpu import FakeGpu
from ._fake_nvml_script import parse_spec

__all__ = ["FakeEventData", "FakeHandle", "FakeNvml"]

_UINT_MAX = 0xFFFFFFFF


@dataclass(frozen=True)
class FakeHandle:
    """What ``nvmlDeviceGetHandleByIndex`` returns: one object per GPU, as NVML caches them."""

    index: int


@dataclass(frozen=True)
class FakeEventData:
    """The fields of pynvml's ``c_nvmlEventData_t`` (whose ``device`` must be a real pointer)."""

    device: FakeHandle
    eventType: int
    eventData: int
    gpuInstanceId: int = _UINT_MAX
    computeInstanceId: int = _UINT_MAX


@dataclass
class _EventSet:
    masks: dict[int, int] = field(default_factory=dict)
    freed: bool = False


def _since(start: float) -> Callable[[], float]:
    """Seconds since ``start`` on the monotonic clock."""
    return lambda: time.monotonic() - start


def _error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


class FakeNvml:
    """Simulated NVML over ``gpus``; ``clock`` gives seconds since the fake started.

    ``calls`` counts calls per function name and ``fields_asked`` counts field ids
    asked of ``nvmlDeviceGetFieldValues``, so tests can check init, handle caching and
    batching. ``errors`` maps a function name to the NVML error code every call raises.
    """

    def __init__(
        self,
        gpus: Sequence[FakeGpu] = (),
        *,
        clock: Callable[[], float] | None = None,
        driver_version: str = "fake-1.0",
        errors: dict[str, int] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.gpus = list(gpus) or [FakeGpu()]
        if clock is None:
            clock = _since(time.monotonic())
        self.clock = clock
        self.driver_version = driver_version
        self.errors = dict(errors or {})
        self.calls: Counter[str] = Counter()
        self.fields_asked: Counter[int] = Counter()
        self._sleep = sleep
        self._handles: dict[int, FakeHandle] = {}
        self._inits = 0
        self._delivered: set[tuple[int, int]] = set()
        self._lock = threading.Lock()

    @classmethod
    def from_spec(
        cls, spec: str, script: Path | None = None, *, clock: Callable[[], float] | None = None
    ) -> FakeNvml:
        """``fake`` or ``fake:N`` (N GPUs), with per-GPU overrides from a JSON ``script``."""
        return cls(parse_spec(spec, script), clock=clock)

    def __getattr__(self, name: str) -> Any:
        """pynvml's constants, structures and error classes; never its driver functions."""
        value = getattr(pynvml, name)
        if inspect.isfunction(value):
            raise AttributeError(f"FakeNvml does not simulate {name}")
        return value

    @property
    def initialized(self) -> bool:
        return self._inits > 0

    def _enter(self, name: str) -> float:
        """Count the call, raise what NVML would (not initialized, scripted error); the time."""
        with self._lock:
            self.calls[name] += 1
        if name != "nvmlInit" and not self._inits:
            raise _error(pynvml.NVML_ERROR_UNINITIALIZED)
        if name in self.errors:
            raise _error(self.errors[name])
        return self.clock()

    def _device(self, name: str, handle: FakeHandle) -> tuple[FakeGpu, float]:
        """``_enter`` for a device call: also a bad handle, the GPU's scripted error, a lost GPU."""
        t = self._enter(name)
        if not isinstance(handle, FakeHandle) or not 0 <= handle.index < len(self.gpus):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[handle.index]
        if name in gpu.errors:
            raise _error(gpu.errors[name])
        if gpu.lost(t):
            raise _error(pynvml.NVML_ERROR_GPU_IS_LOST)
        return gpu, t

    def _handle(self, index: int) -> FakeHandle:
        return self._handles.setdefault(index, FakeHandle(index))

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        self._inits += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self._inits -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._device("nvmlDeviceGetHandleByIndex", FakeHandle(index))
        return self._handle(index)

    def nvmlDeviceGetIndex(self, handle: FakeHandle) -> int:
        self._device("nvmlDeviceGetIndex", handle)
        return handle.index

    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        return self._device("nvmlDeviceGetName", handle)[0].name

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str:
        gpu, _ = self._device("nvmlDeviceGetUUID", handle)
        return gpu.uuid or f"GPU-fa4e0000-0000-4000-8000-{handle.index:012x}"

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeHandle) -> list[Any]:
        gpu, _ = self._device("nvmlDeviceGetComputeRunningProcesses", handle)
        return [SimpleNamespace(pid=pid, usedGpuMemory=gpu.mem_start_bytes) for pid in gpu.pids]

    def nvmlDeviceGetUtilizationRates(self, handle: FakeHandle) -> Any:
        gpu, t = self._device("nvmlDeviceGetUtilizationRates", handle)
        busy = gpu.util(handle.index, t)
        return pynvml.c_nvmlUtilization_t(gpu=busy, memory=busy // 2)

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle, version: int | None = None) -> Any:
        gpu, t = self._device("nvmlDeviceGetMemoryInfo", handle)
        used, total = gpu.mem_used(t), gpu.memory_total_bytes
        if version:
            return pynvml.c_nvmlMemory_v2_t(
                version=version, total=total, reserved=0, free=total - used, used=used
            )
        return pynvml.c_nvmlMemory_t(total=total, free=total - used, used=used)

    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        return self._temperature("nvmlDeviceGetTemperature", handle, sensor)

    def nvmlDeviceGetTemperatureV(
        self, handle: FakeHandle, sensor: int, version: int = pynvml.nvmlTemperature_v1
    ) -> int:
        if version != pynvml.nvmlTemperature_v1:
            raise _error(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        return self._temperature("nvmlDeviceGetTemperatureV", handle, sensor)

    def _temperature(self, name: str, handle: FakeHandle, sensor: int) -> int:
        gpu, t = self._device(name, handle)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu.temp(t)

    def nvmlDeviceGetPowerUsage(self, handle: FakeHandle) -> int:
        gpu, t = self._device("nvmlDeviceGetPowerUsage", handle)
        return gpu.power_mw(t)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: FakeHandle) -> int:
        gpu, _ = self._device("nvmlDeviceGetEnforcedPowerLimit", handle)
        return round(gpu.power_limit_w * 1000)

    def nvmlDeviceGetClockInfo(self, handle: FakeHandle, type: int) -> int:
        gpu, t = self._device("nvmlDeviceGetClockInfo", handle)
        if type not in (pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_GRAPHICS):
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu.sm_clock(t)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: FakeHandle) -> int:
        return self._clock_reasons("nvmlDeviceGetCurrentClocksEventReasons", handle)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeHandle) -> int:
        return self._clock_reasons("nvmlDeviceGetCurrentClocksThrottleReasons", handle)

    def _clock_reasons(self, name: str, handle: FakeHandle) -> int:
        gpu, t = self._device(name, handle)
        reasons = 0
        if gpu.util(handle.index, t) == 0:
            reasons |= pynvml.nvmlClocksEventReasonGpuIdle
        if gpu.thermal_throttled(t):
            reasons |= pynvml.nvmlClocksEventReasonSwThermalSlowdown
        return reasons

    def nvmlDeviceGetPcieThroughput(self, device: FakeHandle, counter: int) -> int:
        gpu, _ = self._device("nvmlDeviceGetPcieThroughput", device)
        if counter == pynvml.NVML_PCIE_UTIL_RX_BYTES:
            return gpu.pcie_rx_kb_per_s
        if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES:
            return gpu.pcie_tx_kb_per_s
        raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetFieldValues(self, handle: FakeHandle, fieldIds: Sequence[Any]) -> Any:
        """Like pynvml: an id or an ``(id, scope)`` pair each; a bare id means scope 0."""
        gpu, t = self._device("nvmlDeviceGetFieldValues", handle)
        values = (pynvml.c_nvmlFieldValue_t * len(fieldIds))()
        for value, asked in zip(values, fieldIds, strict=True):
            fid, scope = asked if isinstance(asked, tuple) else (asked, 0)
            with self._lock:
                self.fields_asked[fid] += 1
            value.fieldId, value.scopeId, value.timestamp = fid, scope, int(t * 1e6)
            answer = self._field(gpu, t, fid, scope)
            if answer is None:
                value.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
            elif answer < 0:
                value.nvmlReturn = pynvml.NVML_ERROR_INVALID_ARGUMENT
            else:
                value.nvmlReturn = pynvml.NVML_SUCCESS
                value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                value.value.ullVal = answer
        return values

    def _field(self, gpu: FakeGpu, t: float, fid: int, scope: int) -> int | None:
        """A field's value; None when unsupported, -1 for a scope the GPU does not have."""
        if fid == pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL:
            return gpu.ecc_count(t) if gpu.ecc else None
        rates = {
            pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: gpu.nvlink_rx_bytes_per_s,
            pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: gpu.nvlink_tx_bytes_per_s,
        }
        if fid not in rates or not gpu.nvlink:
            return None
        if scope == _UINT_MAX:
            return gpu.nvlink_kib(t, rates[fid], gpu.nvlink_links)
        return gpu.nvlink_kib(t, rates[fid], 1) if scope < gpu.nvlink_links else -1

    def nvmlEventSetCreate(self) -> _EventSet:
        self._enter("nvmlEventSetCreate")
        return _EventSet()

    def nvmlDeviceRegisterEvents(
        self, handle: FakeHandle, eventTypes: int, eventSet: _EventSet
    ) -> None:
        """Only XID events are simulated; other event types are NOT_SUPPORTED."""
        self._device("nvmlDeviceRegisterEvents", handle)
        if eventSet.freed or eventTypes & ~pynvml.nvmlEventTypeXidCriticalError:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        eventSet.masks[handle.index] = eventTypes

    def nvmlEventSetWait_v2(self, eventSet: _EventSet, timeoutms: int) -> FakeEventData:
        """The next scripted XID that is due; otherwise sleep ``timeoutms`` and raise Timeout."""
        self._enter("nvmlEventSetWait_v2")
        if eventSet.freed:
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        due = self._next_xid(eventSet)
        if due is None:
            self._sleep(timeoutms / 1000)
            due = self._next_xid(eventSet)
        if due is None:
            raise _error(pynvml.NVML_ERROR_TIMEOUT)
        return due

    def _next_xid(self, eventSet: _EventSet) -> FakeEventData | None:
        t = self.clock()
        with self._lock:
            for index in eventSet.masks:
                for n, (at, code) in enumerate(self.gpus[index].xids):
                    if at <= t and (index, n) not in self._delivered:
                        self._delivered.add((index, n))
                        return FakeEventData(
                            self._handle(index), pynvml.nvmlEventTypeXidCriticalError, code
                        )
        return None

    def nvmlEventSetFree(self, eventSet: _EventSet) -> None:
        self._enter("nvmlEventSetFree")
        eventSet.freed = True
