"""The fake NVML: pynvml's names, signatures, structures and errors; values follow the script."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pynvml
import pytest

from stepwatch.collect._fake_nvml import FakeHandle, FakeNvml
from stepwatch.collect._fake_nvml_gpu import GIB, FakeGpu, ManualClock
from stepwatch.collect._fake_nvml_script import FakeScriptError, load_script, parse_spec

ALL_LINKS = 0xFFFFFFFF


def started(*gpus: FakeGpu, clock: ManualClock | None = None) -> tuple[FakeNvml, ManualClock]:
    clock = clock or ManualClock()
    fake = FakeNvml(gpus, clock=clock, sleep=lambda _s: None)
    fake.nvmlInit()
    return fake, clock


def test_every_simulated_function_has_pynvml_name_and_parameters() -> None:
    simulated = [
        name
        for name, member in inspect.getmembers(FakeNvml, inspect.isfunction)
        if name.startswith("nvml")
    ]
    assert len(simulated) > 20
    for name in simulated:
        ours = list(inspect.signature(getattr(FakeNvml, name)).parameters)[1:]
        theirs = list(inspect.signature(getattr(pynvml, name)).parameters)
        assert ours == theirs, name


def test_constants_and_errors_are_pynvml_own_but_driver_functions_are_not() -> None:
    fake = FakeNvml()
    assert fake.NVMLError is pynvml.NVMLError
    assert fake.NVML_ERROR_GPU_IS_LOST == pynvml.NVML_ERROR_GPU_IS_LOST
    assert fake.nvmlEventTypeXidCriticalError == pynvml.nvmlEventTypeXidCriticalError
    with pytest.raises(AttributeError, match="does not simulate nvmlDeviceGetPciInfo"):
        _ = fake.nvmlDeviceGetPciInfo
    with pytest.raises(AttributeError):
        _ = fake.no_such_thing


def test_calls_before_init_fail_like_nvml_and_init_is_counted() -> None:
    fake = FakeNvml([FakeGpu(), FakeGpu()])
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlShutdown()
    fake.nvmlInit()
    assert fake.initialized and fake.nvmlDeviceGetCount() == 2
    fake.nvmlShutdown()
    assert not fake.initialized
    assert fake.calls["nvmlInit"] == 1 and fake.calls["nvmlShutdown"] == 2


def test_handles_are_one_object_per_gpu_and_answers_are_pynvml_structures() -> None:
    fake, _ = started(FakeGpu(), FakeGpu())
    handle = fake.nvmlDeviceGetHandleByIndex(1)
    assert handle is fake.nvmlDeviceGetHandleByIndex(1) and fake.nvmlDeviceGetIndex(handle) == 1
    assert isinstance(fake.nvmlDeviceGetUtilizationRates(handle), pynvml.c_nvmlUtilization_t)
    assert isinstance(fake.nvmlDeviceGetMemoryInfo(handle), pynvml.c_nvmlMemory_t)
    v2 = fake.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
    assert isinstance(v2, pynvml.c_nvmlMemory_v2_t) and v2.total == 80 * GIB
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        fake.nvmlDeviceGetHandleByIndex(2)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        fake.nvmlDeviceGetName(FakeHandle(7))


def test_temperature_ramps_to_its_ceiling_and_throttles_from_85() -> None:
    fake, clock = started(FakeGpu(temp_start_c=80, temp_ramp_c_per_s=1.0, temp_max_c=90))
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    seen = []
    for t in range(15):
        clock.t = t
        temp = fake.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
        reasons = fake.nvmlDeviceGetCurrentClocksEventReasons(handle)
        clock_mhz = fake.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        seen.append(
            (temp, bool(reasons & pynvml.nvmlClocksEventReasonSwThermalSlowdown), clock_mhz)
        )
    assert [s[0] for s in seen] == [min(90, 80 + t) for t in range(15)]
    assert all(throttled == (temp >= 85) for temp, throttled, _ in seen)
    assert {mhz for temp, _, mhz in seen if temp >= 85} == {1410}
    assert {mhz for temp, _, mhz in seen if temp < 85} == {1980}
    assert fake.nvmlDeviceGetTemperatureV(handle, pynvml.NVML_TEMPERATURE_GPU) == 90
    with pytest.raises(pynvml.NVMLError_NotSupported):
        fake.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU_MAX)


def test_memory_ramps_until_full_and_power_swings_around_its_base() -> None:
    gpu = FakeGpu(
        memory_total_bytes=10 * GIB,
        mem_start_bytes=4 * GIB,
        mem_ramp_bytes_per_s=GIB,
        power_base_w=400,
        power_swing_w=100,
        power_period_s=20,
    )
    fake, clock = started(gpu)
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    used, power = [], []
    for t in range(0, 20):
        clock.t = t
        used.append(fake.nvmlDeviceGetMemoryInfo(handle).used)
        power.append(fake.nvmlDeviceGetPowerUsage(handle))
    assert used[:7] == [(4 + t) * GIB for t in range(7)] and set(used[6:]) == {10 * GIB}
    assert max(power) == 500_000 and min(power) == 300_000 and power[0] == 400_000
    assert power.index(max(power)) == 5 and power.index(min(power)) == 15


def test_utilization_noise_is_bounded_and_repeats_for_the_same_instant() -> None:
    noisy, clock = started(FakeGpu(util_pct=50, util_noise_pct=10))
    handle = noisy.nvmlDeviceGetHandleByIndex(0)
    values = []
    for t in range(50):
        clock.t = t * 0.5
        values.append(noisy.nvmlDeviceGetUtilizationRates(handle).gpu)
    assert all(40 <= v <= 60 for v in values) and len(set(values)) > 3
    again, again_clock = started(FakeGpu(util_pct=50, util_noise_pct=10))
    again_clock.t = 24.5
    assert again.nvmlDeviceGetUtilizationRates(handle).gpu == values[49]
    quiet, _ = started(FakeGpu(util_pct=0, util_noise_pct=0))
    assert quiet.nvmlDeviceGetUtilizationRates(handle).gpu == 0
    assert quiet.nvmlDeviceGetCurrentClocksThrottleReasons(handle) == (
        pynvml.nvmlClocksEventReasonGpuIdle
    )


def test_field_values_follow_scope_and_support_like_nvml() -> None:
    gpu = FakeGpu(nvlink_links=4, nvlink_rx_bytes_per_s=4096, ecc_errors_at_s=[1.0, 2.0, 9.0])
    fake, clock = started(gpu, FakeGpu(ecc=False, nvlink=False))
    clock.t = 10
    rx, tx = (
        pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
        pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
    )
    ecc = pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL
    asked = [ecc, (rx, ALL_LINKS), rx, (rx, 3), (rx, 4), (tx, ALL_LINKS), 9999]
    values = fake.nvmlDeviceGetFieldValues(fake.nvmlDeviceGetHandleByIndex(0), asked)
    assert [v.nvmlReturn for v in values] == [
        pynvml.NVML_SUCCESS,
        pynvml.NVML_SUCCESS,
        pynvml.NVML_SUCCESS,
        pynvml.NVML_SUCCESS,
        pynvml.NVML_ERROR_INVALID_ARGUMENT,
        pynvml.NVML_SUCCESS,
        pynvml.NVML_ERROR_NOT_SUPPORTED,
    ]
    assert values[0].value.ullVal == 3
    assert [values[i].value.ullVal for i in (1, 2, 3)] == [40, 10, 10]  # KiB after 10 s
    assert values[5].value.ullVal == gpu.nvlink_tx_bytes_per_s * 10 // 1024
    assert values[1].timestamp == 10_000_000
    plain = fake.nvmlDeviceGetFieldValues(
        fake.nvmlDeviceGetHandleByIndex(1), [ecc, (rx, ALL_LINKS)]
    )
    assert {v.nvmlReturn for v in plain} == {pynvml.NVML_ERROR_NOT_SUPPORTED}
    assert fake.fields_asked[rx] == 5 and fake.fields_asked[ecc] == 2


def test_a_lost_gpu_raises_gpu_is_lost_from_its_time_on() -> None:
    fake, clock = started(FakeGpu(), FakeGpu(lost_at_s=5))
    handle = fake.nvmlDeviceGetHandleByIndex(1)
    clock.t = 4.9
    assert fake.nvmlDeviceGetPowerUsage(handle) == 450_000
    clock.t = 5
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        fake.nvmlDeviceGetPowerUsage(handle)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        fake.nvmlDeviceGetHandleByIndex(1)
    assert fake.nvmlDeviceGetPowerUsage(fake.nvmlDeviceGetHandleByIndex(0)) == 450_000


def test_scripted_errors_are_raised_per_gpu_and_per_function() -> None:
    gpu = FakeGpu(errors={"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_NO_PERMISSION})
    fake, _ = started(gpu, FakeGpu())
    with pytest.raises(pynvml.NVMLError_NoPermission):
        fake.nvmlDeviceGetPowerUsage(fake.nvmlDeviceGetHandleByIndex(0))
    assert fake.nvmlDeviceGetPowerUsage(fake.nvmlDeviceGetHandleByIndex(1)) == 450_000
    broken = FakeNvml(errors={"nvmlInit": pynvml.NVML_ERROR_DRIVER_NOT_LOADED})
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        broken.nvmlInit()
    assert not broken.initialized


def test_xids_arrive_once_when_due_and_only_from_registered_gpus() -> None:
    fake, clock = started(FakeGpu(xids=[(5.0, 79), (2.0, 48)]), FakeGpu(xids=[(1.0, 13)]))
    events = fake.nvmlEventSetCreate()
    fake.nvmlDeviceRegisterEvents(
        fake.nvmlDeviceGetHandleByIndex(0), pynvml.nvmlEventTypeXidCriticalError, events
    )
    with pytest.raises(pynvml.NVMLError_Timeout):
        fake.nvmlEventSetWait_v2(events, 10)
    clock.t = 6
    got = [fake.nvmlEventSetWait_v2(events, 10) for _ in range(2)]
    assert sorted(e.eventData for e in got) == [48, 79]
    assert {e.device.index for e in got} == {0}
    assert {e.eventType for e in got} == {pynvml.nvmlEventTypeXidCriticalError}
    with pytest.raises(pynvml.NVMLError_Timeout):
        fake.nvmlEventSetWait_v2(events, 10)
    fake.nvmlEventSetFree(events)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        fake.nvmlEventSetWait_v2(events, 10)


def test_from_spec_counts_gpus() -> None:
    assert len(FakeNvml.from_spec("fake").gpus) == 1
    assert len(FakeNvml.from_spec("fake:4").gpus) == 4
    for bad in ("fake:0", "fake:x", "fake:-1", "fake:65", "nvml", "fakes:2"):
        with pytest.raises(FakeScriptError):
            parse_spec(bad)


def write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def test_script_sets_every_gpu_then_each_one(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        {
            "all": {"temp_ramp_c_per_s": 0.5, "power_limit_w": 500},
            "gpus": [
                {"lost_at_s": 30, "xids": [[12.5, 79]]},
                {"power_limit_w": 300, "errors": {"nvmlDeviceGetPowerUsage": "no_permission"}},
            ],
        },
    )
    gpus = parse_spec("fake:3", script)
    assert [g.temp_ramp_c_per_s for g in gpus] == [0.5, 0.5, 0.5]
    assert [g.power_limit_w for g in gpus] == [500, 300, 500]
    assert gpus[0].lost_at_s == 30 and gpus[0].xids == [(12.5, 79)]
    assert gpus[1].errors == {"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_NO_PERMISSION}
    assert len(parse_spec("fake", script)) == 2
    assert len(FakeNvml.from_spec("fake", script).gpus) == 2


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{not json", r"not JSON: .*line 1, column 2"),
        ([1, 2], r'expected \{"all"'),
        ({"gpus": [{}], "extra": 1}, r'expected \{"all"'),
        ({"gpus": {"temp_c": 1}}, "gpus must be a list"),
        (
            {"gpus": [{"temp_ramp": 1}]},
            r"gpus\[0\]: unknown field 'temp_ramp'; known fields: .*temp_ramp_c_per_s",
        ),
        (
            {"gpus": [{}, {"util_pct": "high"}]},
            r"gpus\[1\].util_pct: expected a number, got 'high'",
        ),
        ({"all": {"ecc": 1}}, r"all.ecc: expected true or false"),
        ({"gpus": [{"xids": [[1, 2, 3]]}]}, r"xids: expected a list of \[seconds, xid code\]"),
        ({"gpus": [{"errors": {"nvmlInit": "NO_SUCH"}}]}, "an NVML error name, not 'NO_SUCH'"),
        ({"gpus": [{"power_period_s": 0}]}, "GPU 0: power_period_s must be > 0"),
        ({"gpus": [{}, {}, {}]}, "describes 3 GPUs, more than 2"),
        ([], r'expected \{"all"'),
    ],
)
def test_a_bad_script_says_what_is_wrong_and_where(
    tmp_path: Path, doc: object, message: str
) -> None:
    script = write(tmp_path, doc)
    with pytest.raises(FakeScriptError, match=message) as info:
        load_script(script, 2)
    assert str(script) in str(info.value)


def test_a_missing_script_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FakeScriptError, match=r"cannot read GPU script .*nope.json"):
        FakeNvml.from_spec("fake:2", tmp_path / "nope.json")
