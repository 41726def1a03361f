"""Hardware signals for the robustness cases: the GPUs and the host of node1 every 5 s (the
collector's own store every 10 s), healthy, or with a fault from its onset."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from stepwatch.server._upkeep import USED_RATIO

from ._telemetry import T0, Signal, Stream

GB = 1e9
GPUS = 4


def gpus(
    name: str, healthy: Callable[[Signal, np.ndarray], np.ndarray], fault: float, noise: float
) -> Callable[[Signal, bool], list[Stream]]:
    """The GPUs of node1 every 5 s; GPU 1 of the faulty run at ``fault`` from the onset."""

    def make(sig: Signal, faulty: bool) -> list[Stream]:
        ts = sig.times(5.0)
        shared = healthy(sig, ts - T0)
        out = []
        for gpu in range(GPUS):
            value = shared + noise * sig.noise(ts.size)
            if faulty and gpu == 1:
                later = ts - T0 >= ONSET_HW
                value[later] = fault + noise * sig.noise(int(later.sum()))
            labels = {"run": "r", "node": "node1", "gpu": str(gpu)}
            out.append(Stream(name, labels, "node1/agent", ts, value))
        return out

    return make


ONSET_HW = 900.0  # when hardware faults begin: after the longest window (10 min) has filled
ONSET_TREND = 1800.0  # and trends, after the half hour their slopes want


def peaks(level: float, peak: float, every_s: float, lasting_s: float) -> Callable[..., np.ndarray]:
    """A level with brief peaks, one just after the gap ends (where one sample is all there is)."""

    def healthy(sig: Signal, t: np.ndarray) -> np.ndarray:
        phase = (t - (ONSET_HW - 60.0)) % every_s
        return np.where(phase < lasting_s, peak, level)

    return healthy


def flat(level: float) -> Callable[..., np.ndarray]:
    return lambda sig, t: np.full(t.shape, level)


def power(sig: Signal, t: np.ndarray) -> np.ndarray:
    return np.where((t % 600) < 30, 100.0, 300.0)  # every GPU of the node idles in evaluation


def swinging_power(sig: Signal, faulty: bool) -> list[Stream]:
    streams = gpus("gpu.power_w", power, 300.0, 4.0)(sig, False)
    if faulty:
        stream = streams[1]
        t = stream.ts - T0
        swing = np.where((t // 120) % 2 == 0, 1.3, 0.75)
        stream.value = np.where(t >= ONSET_HW, stream.value * swing, stream.value)
    return streams


def memory(sig: Signal, faulty: bool) -> list[Stream]:
    healthy = peaks(0.80, 0.95, 300.0, 15.0)
    return as_memory(gpus("gpu.mem_used_bytes", healthy, 0.91, 0.004)(sig, faulty))


def as_memory(shares: list[Stream]) -> list[Stream]:
    """Shares of an 80 GB GPU's memory as NVML reports them: used bytes and the total."""
    out = []
    for stream in shares:
        stream.value = stream.value * 80 * GB
        total = replace(stream, name="gpu.mem_total_bytes", value=np.full(stream.ts.size, 80 * GB))
        out += [stream, total]
    return out


def climbing(
    streams: list[Stream], faulty: bool, per_s: float, limit: float = np.inf
) -> list[Stream]:
    """GPU 1 of the faulty run climbs by ``per_s`` a second from ONSET_TREND (up to ``limit``)."""
    if faulty:
        t = streams[1].ts - T0
        streams[1].value = np.minimum(
            streams[1].value + per_s * np.clip(t - ONSET_TREND, 0.0, None), limit
        )
    return streams


def filling_memory(sig: Signal, faulty: bool) -> list[Stream]:
    """GPUs at 70 % with brief highs at 85 %; faulty: GPU 1 fills the rest within 20 minutes."""
    shares = gpus("gpu.mem_used_bytes", peaks(0.70, 0.85, 300.0, 15.0), 0.0, 0.004)(sig, False)
    return as_memory(climbing(shares, faulty, 0.3 / 1200.0, 1.0))


def heating(sig: Signal, faulty: bool) -> list[Stream]:
    """GPUs at 72 °C, 12 °C cooler in a 90 s evaluation every 10 minutes; faulty: GPU 1 heats
    by 30 °C an hour (a failing fan), reaching 85 °C 26 minutes in."""
    temps = gpus("gpu.temp_c", peaks(72.0, 60.0, 600.0, 90.0), 0.0, 0.5)(sig, False)
    return climbing(temps, faulty, 30.0 / 3600.0)


def host(
    name: str,
    healthy: Callable[[Signal, np.ndarray], np.ndarray],
    fault: Callable[..., np.ndarray],
    onset: float = ONSET_HW,
) -> Callable[[Signal, bool], list[Stream]]:
    """One host series of node1 every 5 s; ``fault(t since onset, healthy)`` after the onset."""

    def make(sig: Signal, faulty: bool) -> list[Stream]:
        ts = sig.times(5.0)
        t = ts - T0
        value = healthy(sig, t)
        if faulty:
            later = t >= onset
            value[later] = fault(t[later] - onset, value[later])
        return [Stream(name, {"run": "r", "node": "node1"}, "node1/agent", ts, value)]

    return make


def mem_host(sig: Signal, t: np.ndarray) -> np.ndarray:
    return 100 * GB * (1 + 0.005 * sig.noise(t.size))


def host_memory(sig: Signal, faulty: bool) -> list[Stream]:
    """A quarter of 400 GB used; faulty: the rest filled within 5 minutes from the onset."""
    fill = host("host.mem_used_bytes", mem_host, lambda t, v: np.minimum(v + GB * t, 400 * GB))
    (used,) = fill(sig, faulty)
    return [used, replace(used, name="host.mem_total_bytes", value=np.full(used.ts.size, 400 * GB))]


def forecast_host_memory(sig: Signal, faulty: bool) -> list[Stream]:
    """A quarter of 400 GB used; faulty: the rest filled within 40 minutes from ONSET_TREND."""
    fill = host(
        "host.mem_used_bytes",
        mem_host,
        lambda t, v: np.minimum(v + 300 * GB * t / 2400, 400 * GB),
        ONSET_TREND,
    )
    (used,) = fill(sig, faulty)
    return [used, replace(used, name="host.mem_total_bytes", value=np.full(used.ts.size, 400 * GB))]


def cpu(sig: Signal, t: np.ndarray) -> np.ndarray:
    return np.clip(60 + 8 * sig.noise(t.size), 0, 100)


def disk(sig: Signal, t: np.ndarray) -> np.ndarray:
    # checkpoints take 20 GB every 10 minutes, and the oldest is deleted as the next is written
    return 400 * GB - 20 * GB * ((t % 600) < 300) + 0.01 * GB * sig.noise(t.size)


def checkpoints(sig: Signal, faulty: bool) -> list[Stream]:
    ts = sig.times(300.0)
    rate = np.where(faulty & (ts - T0 >= ONSET_HW), 150e6, 1e9)
    size = 5 * GB * np.ones(ts.size)
    write_s = size / rate * (1 + 0.05 * np.abs(sig.noise(ts.size)))
    labels = {"run": "r", "node": "node1", "rank": "2"}
    return [
        Stream("ckpt.bytes", labels, "node1/sdk2", ts, size),
        Stream("ckpt.write_s", labels, "node1/sdk2", ts, write_s),
    ]


def store(sig: Signal, faulty: bool) -> list[Stream]:
    """The collector's store over its limit, every 10 s: healthy it grows slowly from half of
    it; faulty it stands at 85 % from the onset."""
    ts = sig.times(10.0)
    t = ts - T0
    value = 0.5 + 0.2 * t / sig.end_s + 0.01 * sig.noise(t.size)
    if faulty:
        value[t >= ONSET_HW] = 0.85 + 0.01 * sig.noise(int((t >= ONSET_HW).sum()))
    return [Stream(USED_RATIO, {}, "stepwatch.collector", ts, value)]
