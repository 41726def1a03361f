"""What the common exporters call things, mapped onto our vocabulary (ANOMALIES.md).

Tables, not code: a user's own exporter is one more tuple of rows added to
``DEFAULT_MAPPING``. Within a table the exact source comes before its
fallbacks, since the first row to give a series wins.
"""

from __future__ import annotations

from ._gpu_xid import XID_MEANINGS
from ._scrape_rules import (
    BusyPercent,
    CodeChanges,
    CounterEvents,
    Difference,
    Gauge,
    LabelLookup,
    Rate,
    Rule,
    Total,
)

__all__ = ["DCGM_EXPORTER", "DEFAULT_MAPPING", "NODE_EXPORTER", "NVIDIA_GPU_EXPORTER"]

MIB = 1024.0 * 1024.0
#: DCGM's ``gpu`` label is the index on the node; Hostname, UUID, pod... are dropped.
_DCGM_GPU = {"gpu": "gpu"}
#: nvidia_gpu_exporter labels each series by ``uuid`` only; LabelLookup turns it into the index.
_SMI_GPU = {"uuid": "gpu"}

#: Prometheus node_exporter (Linux collectors cpu, meminfo, netdev, diskstats, filesystem).
NODE_EXPORTER: tuple[Rule, ...] = (
    BusyPercent("node_cpu_seconds_total", "host.cpu_pct", busiest="host.cpu_core_max_pct"),
    Gauge("node_memory_MemTotal_bytes", "host.mem_total_bytes"),
    Difference(
        "host.mem_used_bytes", "node_memory_MemTotal_bytes", "node_memory_MemAvailable_bytes"
    ),
    Rate("node_network_receive_bytes_total", "host.net_rx_bytes_per_s", skip={"device": "lo"}),
    Rate("node_network_transmit_bytes_total", "host.net_tx_bytes_per_s", skip={"device": "lo"}),
    Rate("node_disk_written_bytes_total", "host.disk_write_bytes_per_s"),
    Gauge("node_filesystem_avail_bytes", "host.disk_free_bytes", {"mountpoint": "path"}),
)

#: NVIDIA dcgm-exporter (default counters, plus the ECC, limit and reason fields when enabled).
DCGM_EXPORTER: tuple[Rule, ...] = (
    Gauge("DCGM_FI_DEV_GPU_UTIL", "gpu.util_pct", _DCGM_GPU),
    Gauge("DCGM_FI_DEV_FB_USED", "gpu.mem_used_bytes", _DCGM_GPU, scale=MIB),
    Gauge("DCGM_FI_DEV_FB_TOTAL", "gpu.mem_total_bytes", _DCGM_GPU, scale=MIB),
    Total(
        "gpu.mem_total_bytes",
        ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"),
        ("DCGM_FI_DEV_FB_RESERVED",),
        _DCGM_GPU,
        scale=MIB,
    ),
    Gauge("DCGM_FI_DEV_GPU_TEMP", "gpu.temp_c", _DCGM_GPU),
    Gauge("DCGM_FI_DEV_POWER_USAGE", "gpu.power_w", _DCGM_GPU),
    Gauge("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gpu.power_limit_w", _DCGM_GPU),
    Gauge("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gpu.power_limit_w", _DCGM_GPU),
    Gauge("DCGM_FI_DEV_SM_CLOCK", "gpu.sm_clock_mhz", _DCGM_GPU),
    Gauge("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gpu.throttle_reasons", _DCGM_GPU),
    Gauge("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gpu.throttle_reasons", _DCGM_GPU),
    Gauge("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "gpu.ecc_errors", _DCGM_GPU),
    CodeChanges(
        "DCGM_FI_DEV_XID_ERRORS", "gpu.xid_errors", "gpu_xid", _DCGM_GPU, "XID", XID_MEANINGS, "xid"
    ),
)

#: utkuozdemir/nvidia_gpu_exporter (nvidia-smi or NVML backend).
NVIDIA_GPU_EXPORTER: tuple[Rule, ...] = (
    LabelLookup("nvidia_smi_gpu_info", "uuid", "index"),
    Gauge("nvidia_smi_utilization_gpu_ratio", "gpu.util_pct", _SMI_GPU, scale=100.0),
    Gauge("nvidia_smi_memory_used_bytes", "gpu.mem_used_bytes", _SMI_GPU),
    Gauge("nvidia_smi_memory_total_bytes", "gpu.mem_total_bytes", _SMI_GPU),
    Total(
        "gpu.mem_total_bytes",
        ("nvidia_smi_memory_used_bytes", "nvidia_smi_memory_free_bytes"),
        ("nvidia_smi_memory_reserved_bytes",),
        _SMI_GPU,
    ),
    Gauge("nvidia_smi_temperature_gpu", "gpu.temp_c", _SMI_GPU),
    Gauge("nvidia_smi_power_draw_watts", "gpu.power_w", _SMI_GPU),
    Gauge("nvidia_smi_enforced_power_limit_watts", "gpu.power_limit_w", _SMI_GPU),
    Gauge("nvidia_smi_power_limit_watts", "gpu.power_limit_w", _SMI_GPU),
    Gauge("nvidia_smi_clocks_current_sm_clock_hz", "gpu.sm_clock_mhz", _SMI_GPU, scale=1e-6),
    Gauge("nvidia_smi_clocks_event_reasons_active", "gpu.throttle_reasons", _SMI_GPU),
    Gauge("nvidia_smi_clocks_throttle_reasons_active", "gpu.throttle_reasons", _SMI_GPU),
    Gauge("nvidia_smi_ecc_errors_uncorrected_volatile_total", "gpu.ecc_errors", _SMI_GPU),
    Gauge("nvidia_smi_xid_errors_total", "gpu.xid_errors", _SMI_GPU, combine="sum"),
    CounterEvents(
        "nvidia_smi_xid_errors_total", "gpu_xid", "xid", _SMI_GPU, "XID", XID_MEANINGS, "xid"
    ),
)

#: Every table above; exporters do not share metric names, so one scrape source can use all.
DEFAULT_MAPPING: tuple[Rule, ...] = NODE_EXPORTER + DCGM_EXPORTER + NVIDIA_GPU_EXPORTER
