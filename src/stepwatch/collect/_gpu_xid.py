"""XID errors as NVML reports them: one event set, waited on in a daemon thread.

The thread only records what it saw (with the node clock's time); the source
turns records into events and counters at its next read, so all state stays
on the reading thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["XID_MEANINGS", "XidSeen", "XidWatcher", "WaitFailed"]

#: What the most common XIDs mean (NVIDIA's XID catalogue), for event texts.
XID_MEANINGS: dict[int, str] = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup after earlier errors",
    48: "double-bit ECC error",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
}


@dataclass(frozen=True, slots=True)
class XidSeen:
    """An XID the driver reported; ``gpu`` is None when its device could not be named."""

    at: float
    gpu: int | None
    xid: int


@dataclass(frozen=True, slots=True)
class WaitFailed:
    """Waiting for events failed with an error other than a timeout (reported once per change)."""

    at: float
    error: int
    message: str


class XidWatcher:
    """Registers GPUs for XID events and collects them until ``close``."""

    def __init__(
        self, nvml: Any, handles: Mapping[int, Any], clock: Callable[[], float], wait_ms: int
    ) -> None:
        self._nvml, self._clock, self._wait_ms = nvml, clock, wait_ms
        self._seen: queue.SimpleQueue[XidSeen | WaitFailed] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._set = nvml.nvmlEventSetCreate()
        self.registered = frozenset(i for i, h in handles.items() if self._register(h))
        self._thread = threading.Thread(target=self._run, name="stepwatch-gpu-xid", daemon=True)
        if self.registered:
            self._thread.start()

    @classmethod
    def open(
        cls, nvml: Any, handles: Mapping[int, Any], clock: Callable[[], float], wait_ms: int
    ) -> XidWatcher | None:
        """A watcher, or None where NVML offers no event sets (some VMs, old drivers)."""
        try:
            return cls(nvml, handles, clock, wait_ms)
        except nvml.NVMLError:
            return None

    def _register(self, handle: Any) -> bool:
        try:
            self._nvml.nvmlDeviceRegisterEvents(
                handle, self._nvml.nvmlEventTypeXidCriticalError, self._set
            )
        except self._nvml.NVMLError:
            return False
        return True

    def _run(self) -> None:
        nvml, last_error = self._nvml, None
        while not self._stop.is_set():
            try:
                data = nvml.nvmlEventSetWait_v2(self._set, self._wait_ms)
            except nvml.NVMLError as err:
                if err.value == nvml.NVML_ERROR_TIMEOUT:
                    last_error = None
                    continue
                if err.value != last_error:
                    self._seen.put(WaitFailed(self._clock(), err.value, str(err)))
                last_error = err.value
                self._stop.wait(self._wait_ms / 1000)
                continue
            last_error = None
            if data.eventType & nvml.nvmlEventTypeXidCriticalError:
                self._seen.put(XidSeen(self._clock(), self._index(data.device), data.eventData))

    def _index(self, device: Any) -> int | None:
        try:
            return int(self._nvml.nvmlDeviceGetIndex(device))
        except self._nvml.NVMLError:
            return None

    def drain(self) -> list[XidSeen | WaitFailed]:
        """Everything seen since the last drain, oldest first."""
        out = []
        while True:
            try:
                out.append(self._seen.get_nowait())
            except queue.Empty:
                return out

    def close(self) -> None:
        """Stop and join the thread, then free the event set."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        try:
            self._nvml.nvmlEventSetFree(self._set)
        except self._nvml.NVMLError:
            pass
