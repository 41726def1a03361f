"""ScrapeSource against recorded expositions served by httpx.MockTransport, and failures."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from stepwatch.collect._exporters import DEFAULT_MAPPING
from stepwatch.collect._scrape import ScrapeSource
from stepwatch.collect._scrape_rules import Gauge
from stepwatch.collect._source import Reading

from .conftest import NODE_EXPORTER, exposition

URL = "http://exporter.test:9100/metrics"
MIB = 1024 * 1024
Answer = str | int | Exception


class Clock:
    """Monotonic seconds the test moves by hand."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def serve(clock: Clock, answers: list[Answer], took_s: float = 0.25) -> httpx.Client:
    """A client whose scrapes get ``answers`` in turn (a body, a status, or an exception to
    raise); each scrape takes ``took_s`` on ``clock``."""
    pending = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        clock.t += took_s
        answer = pending.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, int):
            return httpx.Response(answer, text="oops")
        return httpx.Response(200, text=answer)

    return httpx.Client(transport=httpx.MockTransport(handle))


def scrapes(
    answers: list[Answer], every_s: float = 15.0, **kwargs: object
) -> tuple[list[Reading], Callable[[], None]]:
    """Read one source once per answer, the scrapes starting ``every_s`` apart."""
    clock = Clock()
    client = serve(clock, answers)
    source = ScrapeSource(URL, client=client, clock=clock, **kwargs)  # type: ignore[arg-type]
    readings = []
    for n in range(len(answers)):
        clock.t = 1000.0 + n * every_s
        readings.append(source.read(1.7e9 + n * every_s))
    return readings, client.close


def values(reading: Reading, name: str) -> dict[str, float]:
    """``name``'s values by their gpu/path label ('' when unlabelled)."""
    found = {}
    for s in reading.samples:
        if s.name == name:
            found[s.labels.get("gpu", s.labels.get("path", ""))] = s.value
    return found


def scalar(reading: Reading, name: str) -> float | None:
    return values(reading, name).get("")


def test_dcgm_values_units_and_labels() -> None:
    (first, second), close = scrapes([exposition("dcgm_1.prom"), exposition("dcgm_2.prom")])
    close()
    assert values(first, "gpu.util_pct") == {"0": 97.0, "1": 95.0}
    assert values(first, "gpu.mem_used_bytes") == {"0": 40960.0 * MIB, "1": 68606.0 * MIB}
    # no FB_TOTAL in the exposition: used + free + reserved
    assert values(first, "gpu.mem_total_bytes") == {"0": 81559.0 * MIB, "1": 81559.0 * MIB}
    assert values(second, "gpu.temp_c") == {"0": 84.0, "1": 59.0}
    assert values(second, "gpu.power_w") == {"0": 655.9, "1": 601.118}
    assert values(first, "gpu.power_limit_w") == {"0": 700.0, "1": 700.0}
    assert values(second, "gpu.sm_clock_mhz") == {"0": 1755.0, "1": 1980.0}
    assert values(second, "gpu.throttle_reasons") == {"0": 64.0, "1": 0.0}
    assert values(second, "gpu.ecc_errors") == {"0": 0.0, "1": 2.0}
    gpu_series = [s for s in first.samples if s.name.startswith("gpu.")]
    assert gpu_series and all(set(s.labels) == {"gpu"} for s in gpu_series)


def test_dcgm_xid_change_is_one_event_and_a_count() -> None:
    readings, close = scrapes(
        [exposition("dcgm_1.prom"), exposition("dcgm_2.prom"), exposition("dcgm_2.prom")]
    )
    close()
    assert [e for r in readings for e in r.events] == [readings[1].events[0]]
    event = readings[1].events[0]
    assert event.kind == "gpu_xid" and event.labels == {"gpu": "1"}
    assert event.data == {"gpu": 1, "xid": 79}
    assert "XID 79" in event.text and "fallen off the bus" in event.text
    assert [values(r, "gpu.xid_errors") for r in readings] == [
        {"0": 0.0, "1": 0.0},
        {"0": 0.0, "1": 1.0},
        {"0": 0.0, "1": 1.0},
    ]


def test_nvidia_gpu_exporter_uuid_becomes_the_index() -> None:
    (first, second), close = scrapes(
        [exposition("nvidia_gpu_exporter_1.prom"), exposition("nvidia_gpu_exporter_2.prom")]
    )
    close()
    # the first uuid listed is GPU 1 in nvidia_smi_gpu_info
    assert values(first, "gpu.util_pct") == pytest.approx({"1": 100.0, "0": 93.0})
    assert values(second, "gpu.util_pct") == pytest.approx({"1": 98.0, "0": 42.0})
    assert values(first, "gpu.mem_used_bytes") == {"1": 3.3934016512e10, "0": 8.8907710464e10}
    assert values(first, "gpu.mem_total_bytes") == {"1": 1.50754820096e11, "0": 1.50754820096e11}
    assert values(first, "gpu.temp_c") == {"1": 52.0, "0": 49.0}
    assert values(first, "gpu.power_w") == {"1": 592.13, "0": 627.4}
    assert values(first, "gpu.power_limit_w") == {"1": 600.0, "0": 700.0}, "enforced limit first"
    assert values(second, "gpu.sm_clock_mhz") == pytest.approx({"1": 1755.0, "0": 1980.0})
    assert values(second, "gpu.throttle_reasons") == {"1": 4.0, "0": 0.0}
    assert all(set(s.labels) == {"gpu"} for s in first.samples if s.name.startswith("gpu."))


def test_nvidia_gpu_exporter_xid_counters_give_events() -> None:
    (first, second), close = scrapes(
        [exposition("nvidia_gpu_exporter_1.prom"), exposition("nvidia_gpu_exporter_2.prom")]
    )
    close()
    assert not first.events and "gpu.xid_errors" not in {s.name for s in first.samples}
    assert values(second, "gpu.xid_errors") == {"1": 3.0}
    assert sorted((e.kind, e.data["xid"], e.data["count"]) for e in second.events) == [
        ("gpu_xid", 48, 1.0),
        ("gpu_xid", 63, 2.0),
    ]
    assert all(e.labels == {"gpu": "1"} for e in second.events)


def test_node_exporter_rates_between_two_scrapes() -> None:
    (first, second), close = scrapes(
        [exposition("node_exporter_1.prom"), exposition("node_exporter_2.prom")]
    )
    close()
    for name in ("host.net_rx_bytes_per_s", "host.cpu_pct", "host.disk_write_bytes_per_s"):
        assert scalar(first, name) is None
    # deltas written into the fixtures; lo moved 150 MB and must not count
    assert scalar(second, "host.net_rx_bytes_per_s") == pytest.approx((15e6 + 1.5e6) / 15)
    assert scalar(second, "host.net_tx_bytes_per_s") == pytest.approx(3e6 / 15)
    assert scalar(second, "host.disk_write_bytes_per_s") == pytest.approx((120e6 + 30e6) / 15)
    # cpu0 busy 7.5 of 15 s, cpu1 14 of 15 s
    assert scalar(second, "host.cpu_pct") == pytest.approx(100 * 21.5 / 30, abs=1e-6)
    assert scalar(second, "host.cpu_core_max_pct") == pytest.approx(100 * 14 / 15, abs=1e-6)


def test_node_exporter_memory_and_filesystems() -> None:
    (first,), close = scrapes([exposition("node_exporter_1.prom")])
    close()
    assert scalar(first, "host.mem_total_bytes") == 540_950_003_712
    assert scalar(first, "host.mem_used_bytes") == 540_950_003_712 - 401_233_580_032
    free = values(first, "host.disk_free_bytes")
    assert free == {"/": 301_234_884_608, "/data": 12_805_114_933_248, "/run": 54_090_260_480}


def test_counter_reset_gives_no_rate_for_that_scrape() -> None:
    before = exposition("node_exporter_2.prom")
    reset = before.replace(
        'node_network_receive_bytes_total{device="eth0"} 9.82749112345e+11',
        'node_network_receive_bytes_total{device="eth0"} 1.2345e+06',
    )
    assert reset != before
    readings, close = scrapes([before, reset, reset])
    close()
    assert scalar(readings[1], "host.net_rx_bytes_per_s") is None
    assert scalar(readings[1], "host.net_tx_bytes_per_s") == pytest.approx(0.0)
    assert scalar(readings[2], "host.net_rx_bytes_per_s") == pytest.approx(0.0)


def test_reported_total_wins_over_the_derived_one() -> None:
    text = (
        'DCGM_FI_DEV_FB_USED{gpu="0"} 100\nDCGM_FI_DEV_FB_FREE{gpu="0"} 800\n'
        'DCGM_FI_DEV_FB_TOTAL{gpu="0"} 1000\nDCGM_FI_DEV_FB_USED{gpu="1"} 100\n'
        'DCGM_FI_DEV_FB_FREE{gpu="1"} 800\n'
    )
    (reading,), close = scrapes([text])
    close()
    assert values(reading, "gpu.mem_total_bytes") == {"0": 1000.0 * MIB, "1": 900.0 * MIB}


def test_users_extend_the_mapping_and_unknown_metrics_are_ignored() -> None:
    extra = Gauge("vllm:num_requests_running", "serve.requests_running", {"model_name": "model"})
    text = 'vllm:num_requests_running{model_name="llama"} 7\nsomething_else 1\n'
    (reading,), close = scrapes([text], mapping=(*DEFAULT_MAPPING, extra))
    close()
    mapped = [(s.name, s.value, s.labels) for s in reading.samples if s.name != "scrape.duration_s"]
    assert mapped == [
        ("serve.requests_running", 7.0, {"model": "llama"}),
        ("scrape.up", 1.0, {"target": URL}),
    ]


def test_every_scrape_reports_up_and_duration() -> None:
    (reading,), close = scrapes([exposition("dcgm_1.prom")])
    close()
    target = {"target": URL}
    own = [(s.name, s.value, s.labels) for s in reading.samples if s.name.startswith("scrape.")]
    assert own == [("scrape.up", 1.0, target), ("scrape.duration_s", 0.25, target)]


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (exposition("truncated.prom"), "line 21"),
        ("<html><body>Login</body></html>\n", "line 1"),
        (500, "HTTP 500"),
        (httpx.ConnectError("[Errno 111] Connection refused"), "Connection refused"),
        (httpx.ReadTimeout("timed out"), "no answer within 5 s"),
    ],
)
def test_a_failed_scrape_is_up_0_and_one_event_per_streak(answer: Answer, says: str) -> None:
    good = exposition("node_exporter_1.prom")
    readings, close = scrapes([good, answer, answer, good, answer])
    close()
    assert [scalar_up(r) for r in readings] == [1.0, 0.0, 0.0, 1.0, 0.0]
    events = [(n, e) for n, r in enumerate(readings) for e in r.events]
    assert [n for n, _ in events] == [1, 4], "one event when each failure streak starts"
    for _, event in events:
        assert event.kind == "scrape_error" and event.labels == {"target": URL}
        assert says in event.text and URL in event.text
        assert event.data["url"] == URL
    assert not [s for s in readings[1].samples if s.name.startswith("host.")]


def scalar_up(reading: Reading) -> float:
    return next(s.value for s in reading.samples if s.name == "scrape.up")


def test_rates_bridge_a_failed_scrape() -> None:
    one, two = exposition("node_exporter_1.prom"), exposition("node_exporter_2.prom")
    readings, close = scrapes([one, 503, two], every_s=7.5)
    close()
    assert scalar(readings[2], "host.net_tx_bytes_per_s") == pytest.approx(3e6 / 15)


def test_connection_refused_for_real() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        source = ScrapeSource(f"http://127.0.0.1:{port}/metrics", timeout_s=2.0)
        try:
            reading = source.read(1.7e9)
        finally:
            source.close()
    assert scalar_up(reading) == 0.0
    (event,) = reading.events
    assert event.kind == "scrape_error" and "refused" in event.text.lower()


def test_close_leaves_an_injected_client_open() -> None:
    client = serve(Clock(), [exposition("dcgm_1.prom")])
    ScrapeSource(URL, client=client).close()
    assert not client.is_closed
    client.close()


def test_a_malformed_url_is_refused_at_construction() -> None:
    with pytest.raises(httpx.InvalidURL):
        ScrapeSource("http://[::1/metrics")


def test_missing_node_exporter_fails_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, processes: Any, tmp_path: Path
) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_args, **_kw: None)
    with pytest.raises(pytest.fail.Exception, match="run scripts/system-deps"):
        processes.start_daemon(NODE_EXPORTER, [], "http://127.0.0.1:9/", tmp_path / "log")
