"""The GPU source over the fake NVML: values, labels, errors as values, XIDs, schedule, life."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest

from stepwatch.collect._fake_nvml import FakeNvml
from stepwatch.collect._fake_nvml_gpu import GIB, FakeGpu, ManualClock
from stepwatch.collect._gpu import GpuSource, GpuUnavailable, open_gpu
from stepwatch.collect._source import Reading

T0 = 1_700_000_000.0
XID_THREAD = "stepwatch-gpu-xid"
QUIET = {"util_noise_pct": 0.0}


class Rig:
    """A fake NVML, its clock, and sources over it that are all closed at the end."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.sources: list[GpuSource] = []

    def fake(self, *gpus: FakeGpu, **kwargs: Any) -> FakeNvml:
        return FakeNvml(gpus, clock=self.clock, **kwargs)

    def source(self, nvml: Any, **kwargs: Any) -> GpuSource:
        kwargs = {"node_clock": self.clock, "xid_wait_ms": 5} | kwargs
        source = GpuSource(nvml, **kwargs)
        self.sources.append(source)
        return source

    def read(self, source: GpuSource, at: float | None = None) -> Reading:
        if at is not None:
            self.clock.t = at
        return source.read(T0 + self.clock.t)

    def reads(self, source: GpuSource, times: range | list[float]) -> list[Reading]:
        return [self.read(source, t) for t in times]


@pytest.fixture
def rig() -> Iterator[Rig]:
    rig = Rig()
    yield rig
    for source in rig.sources:
        source.close()


def values(reading: Reading, gpu: int) -> dict[str, float]:
    return {s.name: s.value for s in reading.samples if s.labels == {"gpu": str(gpu)}}


def kinds(readings: list[Reading], kind: str) -> list[Any]:
    return [e for r in readings for e in r.events if e.kind == kind]


def read_until(
    rig: Rig, source: GpuSource, done: Callable[[list[Reading]], bool], timeout_s: float = 5.0
) -> list[Reading]:
    """Read (the clock standing still) until ``done`` holds for what was read: the XID thread
    runs on its own time."""
    readings: list[Reading] = []
    deadline = time.monotonic() + timeout_s
    while not done(readings) and time.monotonic() < deadline:
        readings.append(rig.read(source))
        time.sleep(0.005)
    return readings


def test_every_metric_reads_what_each_gpu_reports_labelled_by_index(rig: Rig) -> None:
    a = FakeGpu(util_pct=77, memory_total_bytes=80 * GIB, mem_start_bytes=30 * GIB, **QUIET)
    b = FakeGpu(
        util_pct=12,
        memory_total_bytes=40 * GIB,
        mem_start_bytes=5 * GIB,
        temp_start_c=61,
        power_base_w=123.456,
        power_limit_w=350,
        sm_clock_mhz=1500,
        pcie_rx_kb_per_s=10,
        pcie_tx_kb_per_s=20,
        ecc_errors_at_s=[0.0, 0.0],
        nvlink_rx_bytes_per_s=8e9,
        nvlink_tx_bytes_per_s=2e9,
        **QUIET,
    )
    source = rig.source(rig.fake(a, b), slow_interval_s=10)
    first, second = rig.reads(source, [0.0, 10.0])
    assert {tuple(s.labels.items()) for s in first.samples} == {(("gpu", "0"),), (("gpu", "1"),)}
    assert values(first, 1) == {
        "gpu.util_pct": 12,
        "gpu.mem_used_bytes": 5 * GIB,
        "gpu.mem_total_bytes": 40 * GIB,
        "gpu.temp_c": 61,
        "gpu.power_w": 123.456,
        "gpu.power_limit_w": 350,
        "gpu.sm_clock_mhz": 1500,
        "gpu.throttle_reasons": 0,
        "gpu.ecc_errors": 2,
        "gpu.pcie_rx_bytes_per_s": 10 * 1024,
        "gpu.pcie_tx_bytes_per_s": 20 * 1024,
        "gpu.available": 1,
        "gpu.nvml_errors": 0,
        "gpu.xid_errors": 0,
    }
    assert values(first, 0)["gpu.util_pct"] == 77
    assert values(first, 0)["gpu.mem_used_bytes"] == 30 * GIB
    later = values(second, 1)
    assert later["gpu.nvlink_rx_bytes_per_s"] == pytest.approx(8e9, abs=1024 / 10)
    assert later["gpu.nvlink_tx_bytes_per_s"] == pytest.approx(2e9, abs=1024 / 10)


def test_first_read_describes_each_gpu_once(rig: Rig) -> None:
    fake = rig.fake(FakeGpu(name="H200"), FakeGpu(memory_total_bytes=141 * GIB))
    source = rig.source(fake)
    readings = rig.reads(source, range(3))
    infos = kinds(readings, "gpu_info")
    assert infos == kinds(readings[:1], "gpu_info") and len(infos) == 2
    assert infos[0].labels == {"gpu": "0"} and infos[0].data["name"] == "H200"
    assert infos[1].data["memory_total_bytes"] == 141 * GIB
    assert infos[1].data["uuid"] == fake.nvmlDeviceGetUUID(fake.nvmlDeviceGetHandleByIndex(1))
    assert {i.data["driver_version"] for i in infos} == {"fake-1.0"}
    assert all(i.data["xid_events"] for i in infos)
    assert "H200" in infos[0].text and "141 GiB" in infos[1].text
    assert fake.calls["nvmlDeviceGetName"] == 2


def test_a_temperature_ramp_past_85_sets_the_thermal_throttle_bit(rig: Rig) -> None:
    source = rig.source(rig.fake(FakeGpu(temp_start_c=78, temp_ramp_c_per_s=0.5, **QUIET)))
    series = [values(r, 0) for r in rig.reads(source, range(30))]
    temps = [v["gpu.temp_c"] for v in series]
    hot = [
        bool(int(v["gpu.throttle_reasons"]) & pynvml.nvmlClocksEventReasonSwThermalSlowdown)
        for v in series
    ]
    assert temps[0] == 78 and max(temps) > 85 and temps == sorted(temps)
    assert hot == [t >= 85 for t in temps] and any(hot) and not all(hot)


def test_memory_ramp_and_power_swing_show_in_the_samples(rig: Rig) -> None:
    gpu = FakeGpu(
        mem_start_bytes=GIB,
        mem_ramp_bytes_per_s=GIB / 4,
        power_base_w=300,
        power_swing_w=60,
        power_period_s=8,
        **QUIET,
    )
    series = [values(r, 0) for r in rig.reads(rig.source(rig.fake(gpu)), range(17))]
    used = [v["gpu.mem_used_bytes"] for v in series]
    assert [b - a for a, b in zip(used, used[1:], strict=False)] == [GIB / 4] * 16
    power = [v["gpu.power_w"] for v in series]
    assert max(power) == pytest.approx(360) and min(power) == pytest.approx(240)


def test_an_xid_gives_exactly_one_event_and_counts(rig: Rig) -> None:
    source = rig.source(rig.fake(FakeGpu(), FakeGpu(xids=[(5.0, 79)])))
    before = rig.reads(source, range(5))
    rig.clock.t = 6
    readings = read_until(rig, source, lambda rs: bool(kinds(rs, "gpu_xid")))
    time.sleep(0.05)
    readings += rig.reads(source, [7.0, 8.0])
    assert not kinds(before, "gpu_xid")
    (xid,) = kinds(readings, "gpu_xid")
    assert xid.labels == {"gpu": "1"} and xid.data == {"gpu": 1, "xid": 79}
    assert "GPU 1" in xid.text and "XID 79" in xid.text
    assert xid.ts <= T0 + 6
    assert values(readings[-1], 1)["gpu.xid_errors"] == 1
    assert values(readings[-1], 0)["gpu.xid_errors"] == 0


def test_a_lost_gpu_is_one_event_and_unavailable_while_the_others_read_on(rig: Rig) -> None:
    fake = rig.fake(FakeGpu(), FakeGpu(lost_at_s=3), FakeGpu())
    source = rig.source(fake)
    readings = rig.reads(source, range(8))
    (error,) = kinds(readings, "gpu_error")
    assert error.labels == {"gpu": "1"} and error.ts == T0 + 3
    assert "GPU 1" in error.text and "lost" in error.text
    assert error.data["error"] == pynvml.NVML_ERROR_GPU_IS_LOST
    assert [values(r, 1)["gpu.available"] for r in readings] == [1, 1, 1, 0, 0, 0, 0, 0]
    assert set(values(readings[-1], 1)) == {"gpu.available", "gpu.nvml_errors", "gpu.xid_errors"}
    assert values(readings[-1], 1)["gpu.nvml_errors"] == 5
    for gpu in (0, 2):
        assert values(readings[-1], gpu)["gpu.available"] == 1
        assert "gpu.util_pct" in values(readings[-1], gpu)
    fake.gpus[1].lost_at_s = None
    back = rig.read(source, 8)
    assert [e.kind for e in back.events] == ["gpu_recovered"]
    assert values(back, 1)["gpu.available"] == 1 and "gpu.temp_c" in values(back, 1)


def test_a_gpu_lost_before_the_source_opens_reads_as_unavailable(rig: Rig) -> None:
    fake = rig.fake(FakeGpu(lost_at_s=0), FakeGpu())
    source = rig.source(fake)
    readings = rig.reads(source, range(3))
    assert [e.data["gpu"] for e in kinds(readings, "gpu_error")] == [0]
    assert {values(r, 0)["gpu.available"] for r in readings} == {0}
    assert [e.data["gpu"] for e in kinds(readings, "gpu_info")] == [1]
    fake.gpus[0].lost_at_s = None
    back = rig.read(source, 3)
    assert values(back, 0)["gpu.available"] == 1
    assert [e.kind for e in back.events] == ["gpu_recovered", "gpu_info"]
    assert back.events[1].data["xid_events"] is False


def test_a_not_supported_query_or_field_is_never_asked_again(rig: Rig) -> None:
    nope = {"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_NOT_SUPPORTED}
    fake = rig.fake(FakeGpu(errors=nope, ecc=False, nvlink=False), FakeGpu())
    source = rig.source(fake, slow_interval_s=1)
    readings = rig.reads(source, range(10))
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 1 + 10
    assert fake.fields_asked[pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL] == 1 + 10
    assert fake.fields_asked[pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX] == 1 + 10
    assert fake.calls["nvmlDeviceGetFieldValues"] == 1 + 10
    last = values(readings[-1], 0)
    assert "gpu.power_w" not in last and "gpu.ecc_errors" not in last
    assert last["gpu.nvml_errors"] == 0 and not kinds(readings, "gpu_error")
    assert "gpu.power_w" in values(readings[-1], 1)


def test_another_error_is_counted_each_time_and_reported_once_per_streak(rig: Rig) -> None:
    fake = rig.fake(FakeGpu(errors={"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_NO_PERMISSION}))
    source = rig.source(fake)
    failing = rig.reads(source, range(4))
    fake.gpus[0].errors.clear()
    fine = rig.reads(source, range(4, 6))
    fake.gpus[0].errors["nvmlDeviceGetPowerUsage"] = pynvml.NVML_ERROR_UNKNOWN
    again = rig.reads(source, range(6, 8))
    errors = kinds(failing + fine + again, "gpu_error")
    assert [e.data["error"] for e in errors] == [
        pynvml.NVML_ERROR_NO_PERMISSION,
        pynvml.NVML_ERROR_UNKNOWN,
    ]
    assert errors[0].data["call"] == "nvmlDeviceGetPowerUsage" and "GPU 0" in errors[0].text
    assert all("gpu.power_w" not in values(r, 0) for r in failing + again)
    assert all(values(r, 0)["gpu.power_w"] == 450 for r in fine)
    assert [values(r, 0)["gpu.nvml_errors"] for r in failing + fine + again] == [
        1,
        2,
        3,
        4,
        4,
        4,
        5,
        6,
    ]
    assert all(values(r, 0)["gpu.available"] == 1 for r in failing + again)


@pytest.mark.parametrize(
    ("newest", "older", "metric"),
    [
        ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature", "gpu.temp_c"),
        (
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
            "gpu.throttle_reasons",
        ),
    ],
)
def test_an_older_driver_is_asked_for_the_older_equivalent(
    rig: Rig, newest: str, older: str, metric: str
) -> None:
    missing = {newest: pynvml.NVML_ERROR_FUNCTION_NOT_FOUND}
    fake = rig.fake(FakeGpu(errors=missing), FakeGpu(errors=missing))
    readings = rig.reads(rig.source(fake), range(5))
    assert all(metric in values(r, gpu) for r in readings for gpu in (0, 1))
    assert fake.calls[newest] == 1 and fake.calls[older] == 10
    assert not kinds(readings, "gpu_error")


def test_slow_queries_run_every_slow_interval_only(rig: Rig) -> None:
    fake = rig.fake(FakeGpu(), FakeGpu())
    source = rig.source(fake, interval_s=1, slow_interval_s=10)
    readings = rig.reads(source, range(31))
    slow = [i for i, r in enumerate(readings) if "gpu.pcie_rx_bytes_per_s" in values(r, 0)]
    assert slow == [0, 10, 20, 30] and source.slow_reads == 4
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 4 * 2 * 2
    assert fake.fields_asked[pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX] == 4 * 2
    assert fake.fields_asked[pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL] == 31 * 2
    assert fake.calls["nvmlDeviceGetFieldValues"] == 31 * 2
    nvlink = [i for i, r in enumerate(readings) if "gpu.nvlink_rx_bytes_per_s" in values(r, 0)]
    assert nvlink == [10, 20, 30]


def test_one_init_cached_handles_and_close_joins_and_shuts_down(rig: Rig) -> None:
    fake = rig.fake(FakeGpu(), FakeGpu(), FakeGpu())
    source = GpuSource(fake, node_clock=rig.clock, xid_wait_ms=5)
    assert XID_THREAD in {t.name for t in threading.enumerate()}
    rig.reads(source, range(20))
    assert fake.calls["nvmlInit"] == 1 and fake.calls["nvmlDeviceGetCount"] == 1
    assert fake.calls["nvmlDeviceGetHandleByIndex"] == 3
    assert fake.calls["nvmlShutdown"] == 0
    source.close()
    source.close()
    assert XID_THREAD not in {t.name for t in threading.enumerate()}
    assert fake.calls["nvmlShutdown"] == 1 and fake.calls["nvmlEventSetFree"] == 1
    assert not fake.initialized
    with pytest.raises(RuntimeError, match="closed"):
        source.read(T0)


def test_a_source_is_a_context_manager(rig: Rig) -> None:
    fake = rig.fake()
    with GpuSource(fake, node_clock=rig.clock, xid_wait_ms=5) as source:
        assert values(rig.read(source, 0), 0)["gpu.available"] == 1
    assert not fake.initialized


@pytest.mark.parametrize(
    ("errors", "gpus", "reason", "shutdowns"),
    [
        (
            {"nvmlInit": pynvml.NVML_ERROR_DRIVER_NOT_LOADED},
            1,
            "NVML did not start: Driver Not Loaded",
            0,
        ),
        ({"nvmlDeviceGetCount": pynvml.NVML_ERROR_UNKNOWN}, 1, "cannot count the GPUs: Unknown", 1),
        ({}, 0, "NVML sees no GPU", 1),
    ],
)
def test_nvml_that_cannot_start_is_gpu_unavailable(
    rig: Rig, errors: dict[str, int], gpus: int, reason: str, shutdowns: int
) -> None:
    fake = rig.fake(FakeGpu(), errors=errors)
    fake.gpus = fake.gpus[:gpus]
    with pytest.raises(GpuUnavailable, match=reason) as info:
        GpuSource(fake)
    assert reason in info.value.reason
    assert fake.calls["nvmlShutdown"] == shutdowns and not fake.initialized


def test_without_nvml_events_the_source_reads_without_a_thread(rig: Rig) -> None:
    fake = rig.fake(
        FakeGpu(xids=[(0.0, 79)]), errors={"nvmlEventSetCreate": pynvml.NVML_ERROR_NOT_SUPPORTED}
    )
    source = rig.source(fake)
    assert XID_THREAD not in {t.name for t in threading.enumerate()}
    readings = rig.reads(source, range(3))
    assert [e.data["xid_events"] for e in kinds(readings, "gpu_info")] == [False]
    assert not kinds(readings, "gpu_xid") and values(readings[-1], 0)["gpu.available"] == 1


def test_a_failing_event_wait_is_reported_once(rig: Rig) -> None:
    fake = rig.fake(errors={"nvmlEventSetWait_v2": pynvml.NVML_ERROR_UNKNOWN})
    source = rig.source(fake)
    readings = read_until(rig, source, lambda rs: fake.calls["nvmlEventSetWait_v2"] >= 5)
    time.sleep(0.02)
    readings.append(rig.read(source))
    (error,) = kinds(readings, "gpu_error")
    assert error.labels == {} and error.data["call"] == "nvmlEventSetWait_v2"
    assert "XID" in error.text and "Unknown" in error.text


def test_open_gpu_none_fake_and_script(tmp_path: Path, rig: Rig) -> None:
    assert open_gpu("none") == (None, "GPU metrics off (--gpu none)")
    source, line = open_gpu("fake:3", xid_wait_ms=5)
    assert source is not None
    rig.sources.append(source)
    assert source.gpu_count == 3 and "3" in line and "fake:3" in line
    script = tmp_path / "gpus.json"
    script.write_text(json.dumps({"gpus": [{"util_pct": 10, "util_noise_pct": 0}, {}]}))
    scripted, _ = open_gpu("fake", script, xid_wait_ms=5)
    assert scripted is not None
    rig.sources.append(scripted)
    assert scripted.gpu_count == 2
    assert values(scripted.read(T0), 0)["gpu.util_pct"] == 10
    with pytest.raises(ValueError, match="needs --gpu fake"):
        open_gpu("auto", script)
    with pytest.raises(ValueError, match="unknown GPU spec 'gpu0'"):
        open_gpu("gpu0")
    with pytest.raises(ValueError, match="fake:N"):
        open_gpu("fake:many")


def test_open_gpu_auto_and_nvml_over_an_nvml_module(rig: Rig) -> None:
    source, line = open_gpu("auto", nvml=rig.fake(FakeGpu(), FakeGpu()), xid_wait_ms=5)
    assert source is not None
    rig.sources.append(source)
    assert line == "NVML: 2 GPUs, driver fake-1.0"
    broken = {"nvmlInit": pynvml.NVML_ERROR_LIBRARY_NOT_FOUND}
    none, why = open_gpu("auto", nvml=rig.fake(errors=broken))
    assert none is None and "NVML Shared Library Not Found" in why and "--gpu fake:N" in why
    with pytest.raises(GpuUnavailable, match="NVML Shared Library Not Found"):
        open_gpu("nvml", nvml=rig.fake(errors=broken))


def real_nvml_works() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


def test_on_a_machine_without_a_driver_auto_says_why_and_nvml_raises() -> None:
    if real_nvml_works():
        pytest.skip("this machine has a working NVML")
    source, why = open_gpu("auto")
    assert source is None and why.startswith("no GPU metrics: NVML did not start")
    assert "--gpu fake:N" in why and "\n" not in why
    with pytest.raises(GpuUnavailable, match="NVML did not start"):
        open_gpu("nvml")


def test_on_a_machine_with_a_driver_auto_opens_nvml() -> None:
    if not real_nvml_works():
        pytest.skip("this machine has no working NVML")
    source, line = open_gpu("auto")
    assert source is not None and line.startswith("NVML: ")
    with source:
        assert any(s.name == "gpu.available" for s in source.read(time.time()).samples)
