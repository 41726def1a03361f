"""What the GPU source asks NVML about each device, and how each answer becomes metrics.

Plain calls are listed with their equivalents, newest first: a driver that lacks
the newest symbol answers FUNCTION_NOT_FOUND and the next one is used. Counters
NVML offers as field ids are read in one ``nvmlDeviceGetFieldValues`` call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["FIELDS", "KIB", "QUERIES", "UINT_MAX", "FieldSpec", "Query", "field_number"]

KIB = 1024
#: Field scope meaning "all links summed" for NVLink counters (a bare id means link 0 only).
UINT_MAX = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class Query:
    """One NVML call per device: ``functions(handle, *args)``; ``args`` name NVML constants."""

    key: str
    functions: tuple[str, ...]
    args: tuple[str, ...]
    convert: Callable[[Any], dict[str, float]]
    slow: bool = False


def _milli(metric: str) -> Callable[[Any], dict[str, float]]:
    return lambda mw: {metric: mw / 1000}


def _kib_per_s(metric: str) -> Callable[[Any], dict[str, float]]:
    return lambda kb: {metric: kb * KIB}


QUERIES: tuple[Query, ...] = (
    Query("utilization", ("nvmlDeviceGetUtilizationRates",), (), lambda u: {"gpu.util_pct": u.gpu}),
    Query(
        "memory",
        ("nvmlDeviceGetMemoryInfo",),
        (),
        lambda m: {"gpu.mem_used_bytes": m.used, "gpu.mem_total_bytes": m.total},
    ),
    Query(
        "temperature",
        ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"),
        ("NVML_TEMPERATURE_GPU",),
        lambda c: {"gpu.temp_c": c},
    ),
    Query("power", ("nvmlDeviceGetPowerUsage",), (), _milli("gpu.power_w")),
    Query("power_limit", ("nvmlDeviceGetEnforcedPowerLimit",), (), _milli("gpu.power_limit_w")),
    Query(
        "sm_clock",
        ("nvmlDeviceGetClockInfo",),
        ("NVML_CLOCK_SM",),
        lambda f: {"gpu.sm_clock_mhz": f},
    ),
    Query(
        "throttle",
        ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
        (),
        lambda bits: {"gpu.throttle_reasons": bits},
    ),
    Query(
        "pcie_rx",
        ("nvmlDeviceGetPcieThroughput",),
        ("NVML_PCIE_UTIL_RX_BYTES",),
        _kib_per_s("gpu.pcie_rx_bytes_per_s"),
        slow=True,
    ),
    Query(
        "pcie_tx",
        ("nvmlDeviceGetPcieThroughput",),
        ("NVML_PCIE_UTIL_TX_BYTES",),
        _kib_per_s("gpu.pcie_tx_bytes_per_s"),
        slow=True,
    ),
)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """A field id (by its NVML constant name) and scope; ``per_second`` turns a KiB counter
    into bytes/s between two reads."""

    constant: str
    scope: int
    metric: str
    per_second: bool = False
    slow: bool = False


FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("NVML_FI_DEV_ECC_DBE_VOL_TOTAL", 0, "gpu.ecc_errors"),
    FieldSpec(
        "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX",
        UINT_MAX,
        "gpu.nvlink_rx_bytes_per_s",
        per_second=True,
        slow=True,
    ),
    FieldSpec(
        "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX",
        UINT_MAX,
        "gpu.nvlink_tx_bytes_per_s",
        per_second=True,
        slow=True,
    ),
)

#: The union member of ``c_nvmlValue_t`` that holds each NVML_VALUE_TYPE_* (0..6).
_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def field_number(value: Any) -> float | None:
    """The number in one ``c_nvmlFieldValue_t``; None for a value type we do not know."""
    if not 0 <= value.valueType < len(_VALUE_MEMBERS):
        return None
    return float(getattr(value.value, _VALUE_MEMBERS[value.valueType]))
