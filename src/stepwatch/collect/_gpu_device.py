"""Reading one GPU: its queries and fields, each failure turned into an absent value and an event.

NOT_SUPPORTED is remembered per device and never asked again; other errors are
counted (``gpu.nvml_errors``) and reported once per change; an error that means
the GPU itself stopped answering (lost, needs a reset) ends that GPU's read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..model import Event
from ._gpu_queries import FIELDS, KIB, QUERIES, Query, field_number
from ._pod_resources import PodResources
from ._pods import Pods
from ._source import Sample

__all__ = ["Device", "DeviceReader", "ReadOut"]

GIB = 1 << 30

#: NVML errors after which a GPU answers nothing until it is back (or reset).
_DOWN_ERRORS = (
    "NVML_ERROR_GPU_IS_LOST",
    "NVML_ERROR_RESET_REQUIRED",
    "NVML_ERROR_GPU_NOT_FOUND",
    "NVML_ERROR_DRIVER_NOT_LOADED",
    "NVML_ERROR_UNINITIALIZED",
)


class _Down(Exception):
    """The GPU stopped answering: the rest of its read is skipped."""


class _Miss(Enum):
    ABSENT = "absent"  # NVML said no: the value is absent
    NOT_FOUND = "not found"  # the driver lacks the function: try its older equivalent


@dataclass
class Device:
    """What the source remembers about one GPU between reads."""

    index: int
    handle: Any = None
    xid_events: bool = False
    nvml_errors: int = 0
    xid_errors: int = 0
    down: int | None = None
    info_sent: bool = False
    unsupported: set[str] = field(default_factory=set)
    failing: dict[str, int] = field(default_factory=dict)
    counters: dict[int, tuple[float, float]] = field(default_factory=dict)
    #: Its UUID, once NVML has told it.
    uuid: str | None = None
    #: The Kubernetes pod, namespace and container it is allocated to, or else that of the
    #: processes on it (one pod's).
    pod: dict[str, str] = field(default_factory=dict)

    @property
    def labels(self) -> dict[str, str]:
        return {"gpu": str(self.index), **self.pod}

    @property
    def available(self) -> bool:
        return self.handle is not None and self.down is None


@dataclass
class ReadOut:
    """What one read of the source collects: ``now`` stamps events, ``mono`` times rates."""

    now: float
    mono: float
    samples: list[Sample] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def event(self, dev: Device, kind: str, text: str, **data: Any) -> None:
        self.events.append(Event(self.now, kind, text, dev.labels, {"gpu": dev.index, **data}))


def _present(nvml: Any, names: tuple[str, ...]) -> list[Any]:
    """The functions of ``names`` that this NVML module offers, in order."""
    return [getattr(nvml, n) for n in names if hasattr(nvml, n)]


class DeviceReader:
    """Reads devices through ``nvml`` (pynvml or a fake), one code path for both."""

    def __init__(
        self,
        nvml: Any,
        driver_version: str,
        pods: Pods | None = None,
        pod_resources: PodResources | None = None,
    ) -> None:
        self._nvml, self._error = nvml, nvml.NVMLError
        self._pods = pods or Pods()
        self._pod_resources = pod_resources
        self.driver_version = driver_version
        self._functions = {q.key: _present(nvml, q.functions) for q in QUERIES}
        self._functions["fields"] = _present(nvml, ("nvmlDeviceGetFieldValues",))
        self._args = {q.key: tuple(getattr(nvml, a) for a in q.args) for q in QUERIES}
        self._fields = [(getattr(nvml, f.constant), f) for f in FIELDS if hasattr(nvml, f.constant)]
        self._success = nvml.NVML_SUCCESS
        self._not_supported = nvml.NVML_ERROR_NOT_SUPPORTED
        self._not_found = nvml.NVML_ERROR_FUNCTION_NOT_FOUND
        self._down_codes = {getattr(nvml, n) for n in _DOWN_ERRORS if hasattr(nvml, n)}

    def read(self, dev: Device, out: ReadOut, slow: bool) -> None:
        """Append the device's samples (and any events) to ``out``; never raises for NVML."""
        values: dict[str, float] = {}
        try:
            if dev.handle is None:
                self._attach(dev, out)
            for query in QUERIES:
                if slow or not query.slow:
                    values.update(self._query(dev, query, out))
            values.update(self._read_fields(dev, out, slow))
            if slow:
                self._find_pod(dev, out)
            if not dev.info_sent:
                self._info(dev, out, values.get("gpu.mem_total_bytes"))
        except _Down:
            values = {}
        values["gpu.available"] = 1.0 if dev.available else 0.0
        values["gpu.nvml_errors"] = dev.nvml_errors
        values["gpu.xid_errors"] = dev.xid_errors
        out.samples += [Sample(name, float(v), dev.labels) for name, v in values.items()]

    def _attach(self, dev: Device, out: ReadOut) -> None:
        """Get the handle a GPU did not give when the source opened."""
        handle = self._call(
            dev, "handle", self._nvml.nvmlDeviceGetHandleByIndex, dev.index, out=out
        )
        if isinstance(handle, _Miss):
            raise _Down
        dev.handle = handle

    def _query(self, dev: Device, query: Query, out: ReadOut) -> dict[str, float]:
        functions = self._functions[query.key]
        while functions and query.key not in dev.unsupported:
            args = (dev.handle, *self._args[query.key])
            answer = self._call(dev, query.key, functions[0], *args, out=out)
            if answer is _Miss.NOT_FOUND:
                functions.pop(0)
                continue
            return {} if answer is _Miss.ABSENT else query.convert(answer)
        return {}

    def _read_fields(self, dev: Device, out: ReadOut, slow: bool) -> dict[str, float]:
        """Every field this read wants, in one batched call."""
        wanted = [
            (fid, spec)
            for fid, spec in self._fields
            if (slow or not spec.slow) and f"field {fid}" not in dev.unsupported
        ]
        functions = self._functions["fields"]
        if not wanted or not functions or "fields" in dev.unsupported:
            return {}
        asked = [(fid, spec.scope) for fid, spec in wanted]
        answer = self._call(dev, "fields", functions[0], dev.handle, asked, out=out)
        if answer is _Miss.NOT_FOUND:
            functions.clear()
        if isinstance(answer, _Miss):
            return {}
        values = {}
        for (fid, spec), value in zip(wanted, answer, strict=True):
            number = self._field(dev, fid, value, out)
            if number is not None and spec.per_second:
                number = self._rate(dev, fid, number, out.mono)
            if number is not None:
                values[spec.metric] = number
        return values

    def _field(self, dev: Device, fid: int, value: Any, out: ReadOut) -> float | None:
        """One field's number, or None (remembering NOT_SUPPORTED, reporting other errors)."""
        key = f"field {fid}"
        if value.nvmlReturn == self._success:
            dev.failing.pop(key, None)
            return field_number(value)
        err = self._error(value.nvmlReturn)
        if (
            self._fail(dev, key, f"nvmlDeviceGetFieldValues (field {fid})", err, out)
            is _Miss.NOT_FOUND
        ):
            dev.unsupported.add(key)
        return None

    def _rate(self, dev: Device, fid: int, kib: float, mono: float) -> float | None:
        """Bytes/s of a cumulative KiB counter since the last read; None on the first or a reset."""
        previous = dev.counters.get(fid)
        dev.counters[fid] = (kib, mono)
        if previous is None or mono <= previous[1] or kib < previous[0]:
            return None
        return (kib - previous[0]) * KIB / (mono - previous[1])

    def _info(self, dev: Device, out: ReadOut, memory_total: float | None) -> None:
        """One gpu_info event per device, at its first read that answers."""
        name = self._text(dev, "name", self._nvml.nvmlDeviceGetName, out)
        uuid = self._uuid(dev, out)
        dev.info_sent = True
        memory = f"{memory_total / GIB:.0f} GiB" if memory_total is not None else "memory unknown"
        text = f"GPU {dev.index}: {name or 'unnamed'} ({uuid}), {memory}"
        out.event(
            dev,
            "gpu_info",
            f"{text}, driver {self.driver_version}",
            name=name,
            uuid=uuid,
            memory_total_bytes=memory_total,
            driver_version=self.driver_version,
            xid_events=dev.xid_events,
        )

    def _find_pod(self, dev: Device, out: ReadOut) -> None:
        """Label the GPU with its pod, as the DCGM exporter does: the one the kubelet allocated
        it to (pod-resources), or else that of the processes computing on it; none when it runs
        none, or several pods' (a shared GPU)."""
        allocated = self._allocated(dev, out)
        if allocated is not None:
            dev.pod = allocated
            return
        fn = getattr(self._nvml, "nvmlDeviceGetComputeRunningProcesses", None)
        if fn is None or "processes" in dev.unsupported:
            return
        running = self._call(dev, "processes", fn, dev.handle, out=out)
        if isinstance(running, _Miss):
            return
        found = {tuple(sorted(self._pods.of(int(p.pid)).items())) for p in running}
        dev.pod = dict(found.pop()) if len(found) == 1 else {}

    def _allocated(self, dev: Device, out: ReadOut) -> dict[str, str] | None:
        """The labels of the pod container the kubelet allocated the GPU to, or None."""
        if self._pod_resources is None or not self._pod_resources.gpus:
            return None
        uuid = self._uuid(dev, out)
        return self._pod_resources.of(uuid) if uuid else None

    def _uuid(self, dev: Device, out: ReadOut) -> str:
        """The GPU's UUID, asked of NVML until it answers; "" until then."""
        if dev.uuid is None and "uuid" not in dev.unsupported:
            dev.uuid = self._text(dev, "uuid", self._nvml.nvmlDeviceGetUUID, out) or None
        return dev.uuid or ""

    def _text(self, dev: Device, key: str, fn: Any, out: ReadOut) -> str:
        answer = self._call(dev, key, fn, dev.handle, out=out)
        return answer if isinstance(answer, str) else ""

    def _call(self, dev: Device, key: str, fn: Any, *args: Any, out: ReadOut) -> Any:
        """``fn(*args)``, or a _Miss when NVML says no (raises _Down when the GPU is gone)."""
        try:
            value = fn(*args)
        except self._error as err:
            return self._fail(dev, key, fn.__name__, err, out)
        if dev.down is not None:
            out.event(dev, "gpu_recovered", f"GPU {dev.index} answers again", error=dev.down)
            dev.down = None
        dev.failing.pop(key, None)
        return value

    def _fail(self, dev: Device, key: str, what: str, err: Any, out: ReadOut) -> _Miss:
        """Count and report an NVML error once per change; a GPU that is gone raises _Down."""
        code = err.value
        if code == self._not_found:
            return _Miss.NOT_FOUND
        if code == self._not_supported:
            dev.unsupported.add(key)
            return _Miss.ABSENT
        dev.nvml_errors += 1
        data = {"call": what, "error": code, "message": str(err)}
        if code in self._down_codes:
            if dev.down != code:
                dev.down = code
                out.event(dev, "gpu_error", f"GPU {dev.index} stopped answering: {err}", **data)
            raise _Down
        if dev.failing.get(key) != code:
            dev.failing[key] = code
            out.event(dev, "gpu_error", f"GPU {dev.index}: {what} failed: {err}", **data)
        return _Miss.ABSENT
