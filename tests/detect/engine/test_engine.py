"""The rule engine: routing, thresholds held for a duration, detectors, log rules, annotations."""

from __future__ import annotations

import numpy as np

from stepwatch.detect import DETECTORS, Alert, Engine, builtin_rules, parse_rules
from stepwatch.model import NO_STEP, Event, SampleBatch, SeriesKey

RULES = """\
groups:
  - name: g
    rules:
      - alert: gpu_hot
        kind: gpu_thermal
        signal: {metric: gpu.temp_c, by: [node, gpu]}
        threshold: ">= 80"
        for: 5m
        labels: {team: infra}
        annotations: {summary: "GPU {{ $labels.gpu }} of {{ $labels.node }} at {{ $value }} C"}
      - alert: nan_loss
        kind: nonfinite
        signal: {metric: loss, match: {rank: "0"}}
        detector: nonfinite
        severity: critical
      - alert: log_oom
        signal: {log: {regex: "CUDA out of memory"}, by: [node]}
"""


def _engine() -> Engine:
    return Engine(parse_rules(RULES, "rules.yaml", DETECTORS))


def _batch(rows: list[tuple[str, dict[str, str], float, float]], events=()) -> SampleBatch:  # type: ignore[no-untyped-def]
    keys = sorted({SeriesKey.of(name, labels) for name, labels, _, _ in rows}, key=str)
    index = {k: i for i, k in enumerate(keys)}
    return SampleBatch(
        "test",
        0,
        keys,
        np.array([index[SeriesKey.of(n, lab)] for n, lab, _, _ in rows], np.uint32),
        np.array([ts for _, _, ts, _ in rows], np.float64),
        np.full(len(rows), NO_STEP, np.int64),
        np.array([v for _, _, _, v in rows], np.float64),
        list(events),
    )


def _temps(
    hot_from: float, hot_to: float, end: float
) -> list[tuple[str, dict[str, str], float, float]]:
    rows = []
    for t in np.arange(0.0, end, 10.0):
        for gpu in ("0", "1"):
            hot = gpu == "1" and hot_from <= t < hot_to
            labels = {"run": "r", "node": "n2", "gpu": gpu}
            rows.append(("gpu.temp_c", labels, float(t), 86.0 if hot else 60.0))
    return rows


def _summary(alerts: list[Alert]) -> list[tuple[str, str, float, dict[str, str]]]:
    return [(a.kind, a.state, a.ts, a.labels) for a in alerts]


def test_a_threshold_fires_after_for_and_resolves_once_the_condition_ends() -> None:
    alerts = _engine().process(_batch(_temps(100.0, 800.0, 1000.0)))
    entity = {"run": "r", "node": "n2", "gpu": "1", "team": "infra"}
    assert _summary(alerts) == [
        ("gpu_thermal", "pending", 100.0, entity),
        ("gpu_thermal", "firing", 400.0, entity),
        ("gpu_thermal", "resolved", 800.0, entity),
    ]
    assert alerts[1].annotations == {"summary": "GPU 1 of n2 at 86 C"}
    assert alerts[1].since == 100.0 and alerts[1].severity == "warning"


def test_a_stream_split_into_batches_gives_the_same_alerts() -> None:
    rows = _temps(100.0, 800.0, 1000.0)
    whole = _summary(_engine().process(_batch(rows)))
    engine, split = _engine(), []
    for start in range(0, len(rows), 7):
        split += _summary(engine.process(_batch(rows[start : start + 7])))
    assert split == whole


def test_detector_rules_read_only_the_series_they_match() -> None:
    nan = float("nan")
    rows = [
        ("train.loss", {"run": "r", "rank": "0"}, 1.0, 2.0),
        ("train.loss", {"run": "r", "rank": "1"}, 2.0, nan),  # not rank 0: not read
        ("train.loss", {"run": "r", "rank": "0"}, 3.0, nan),
        ("train.lr", {"run": "r", "rank": "0"}, 3.0, nan),  # another metric
    ]
    alerts = _engine().process(_batch(rows))
    assert [(a.kind, a.state, a.ts, a.labels) for a in alerts] == [
        ("nonfinite", "pending", 3.0, {"run": "r"}),
        ("nonfinite", "firing", 3.0, {"run": "r"}),
    ]
    assert alerts[1].severity == "critical"


def test_a_matcher_of_an_empty_value_reads_the_series_without_that_label() -> None:
    rules = RULES.replace('match: {rank: "0"}', 'match: {rank: ["0", ""]}')
    engine = Engine(parse_rules(rules, "rules.yaml", DETECTORS))
    runs = (("ranked", {"rank": "0"}), ("alone", {}), ("other", {"rank": "1"}))
    rows = [("loss", {"run": r, **extra}, 1.0, float("nan")) for r, extra in runs]
    fired = [a.labels["run"] for a in engine.process(_batch(rows)) if a.state == "firing"]
    assert sorted(fired) == ["alone", "ranked"]


def test_log_rules_fire_once_per_entity_and_incident() -> None:
    def line(ts: float, node: str, text: str) -> Event:
        return Event(ts, "log", text, {"run": "r", "node": node, "rank": "3"})

    engine = _engine()
    events = [
        line(10.0, "n1", "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB"),
        line(20.0, "n1", "torch.OutOfMemoryError: CUDA out of memory."),  # same incident
        line(30.0, "n2", "CUDA out of memory"),
        line(40.0, "n2", "warning: memory is getting tight"),  # no match
    ]
    first = engine.process(_batch([], events))
    later = engine.process(_batch([], [line(700.0, "n1", "CUDA out of memory")]))
    assert [(a.kind, a.ts, a.labels) for a in first + later] == [
        ("log_oom", 10.0, {"run": "r", "node": "n1"}),
        ("log_oom", 30.0, {"run": "r", "node": "n2"}),
        ("log_oom", 700.0, {"run": "r", "node": "n1"}),
    ]
    assert all(a.state == "firing" for a in first + later)


GROUP_RULES = """\
groups:
  - name: g
    rules:
      - alert: straggler
        signal: {metric: train.compute_time_s, by: [rank]}
        detector: {type: peers, ratio: 1.25, min_steps: 5}
      - alert: node_down
        signal: {metric: [stepwatch.heartbeat_s, host.cpu_pct], by: [node]}
        detector: {type: absence, timeout_s: 60}
        severity: critical
"""


def _step_rows(steps: range, slow_rank: int, slow_from: int) -> list:  # type: ignore[type-arg]
    rows = []
    for step in steps:
        for rank in range(4):
            value = 1.0 * (1.5 if rank == slow_rank and step >= slow_from else 1.0)
            labels = {"run": "r", "rank": str(rank), "node": f"n{rank // 2}"}
            rows.append(("train.compute_time_s", labels, float(step), value))
    return rows


def _stepped(rows: list) -> SampleBatch:  # type: ignore[type-arg]
    batch = _batch(rows)
    batch.step = batch.ts.astype(np.int64)  # one step a second
    return batch


def test_the_slow_rank_and_only_it_is_a_straggler_after_min_steps() -> None:
    engine = Engine(parse_rules(GROUP_RULES, "g.yaml", DETECTORS))
    rows = _step_rows(range(40), slow_rank=2, slow_from=20)
    alerts = engine.process(_stepped(rows[:80])) + engine.process(_stepped(rows[80:]))
    firing = [(a.kind, a.labels) for a in alerts if a.state == "firing"]
    assert firing == [("straggler", {"run": "r", "rank": "2"})]
    (fired,) = [a for a in alerts if a.state == "firing"]
    assert 24.0 <= fired.ts <= 26.0 and fired.value == 1.5


def test_a_node_that_goes_silent_while_others_report_is_down() -> None:
    engine = Engine(parse_rules(GROUP_RULES, "g.yaml", DETECTORS))
    rows = []
    for t in range(0, 300, 5):
        for node in ("n0", "n1", "n2"):
            if node == "n1" and t >= 100:
                continue  # n1 falls silent at 100 s
            name = "stepwatch.heartbeat_s" if node == "n0" else "host.cpu_pct"
            rows.append((name, {"run": "r", "node": node}, float(t), 1.0))
    alerts = engine.process(_batch(rows))
    assert [(a.kind, a.state, a.labels, a.since) for a in alerts] == [
        ("node_down", "firing", {"run": "r", "node": "n1"}, 95.0),
    ]
    assert 155.0 < alerts[0].ts <= 165.0


def test_divide_by_reads_the_latest_divisor_of_the_same_entity() -> None:
    rules = """\
groups:
  - name: g
    rules:
      - alert: gpu_memory_pressure
        signal: {metric: gpu.mem_used_bytes, divide_by: gpu.mem_total_bytes, by: [node, gpu]}
        threshold: "> 0.9"
"""
    engine = Engine(parse_rules(rules, "g.yaml", DETECTORS))
    gpu0, gpu1 = {"run": "r", "node": "n", "gpu": "0"}, {"run": "r", "node": "n", "gpu": "1"}
    first = engine.process(
        _batch(
            [
                ("gpu.mem_used_bytes", gpu0, 0.5, 95.0),  # no total yet: nothing to say
                ("gpu.mem_total_bytes", gpu0, 2.0, 100.0),
                ("gpu.mem_used_bytes", gpu0, 2.0, 80.0),
                ("gpu.mem_total_bytes", gpu1, 2.0, 50.0),
                ("gpu.mem_used_bytes", gpu1, 2.0, 80.0),  # 1.6 of gpu1's total
            ]
        )
    )
    later = engine.process(_batch([("gpu.mem_used_bytes", gpu0, 3.0, 95.0)]))  # total from before
    assert [(a.state, a.ts, a.labels["gpu"], a.value) for a in first + later] == [
        ("pending", 2.0, "1", 1.6),
        ("firing", 2.0, "1", 1.6),
        ("pending", 3.0, "0", 0.95),
        ("firing", 3.0, "0", 0.95),
    ]


DEDUP_RULES = """\
groups:
  - name: g
    rules:
      - alert: nan_loss
        kind: nonfinite
        signal: {metric: loss}
        detector: nonfinite
      - alert: nan_grad
        kind: nonfinite
        signal: {metric: grad_norm}
        detector: nonfinite
      - alert: slow_data
        kind: dataloader_bottleneck
        signal: {metric: data_s, by: [node]}
        threshold: "> 1"
"""


def test_one_alert_per_kind_and_entity_opened_by_the_first_closed_by_the_last() -> None:
    engine = Engine(parse_rules(DEDUP_RULES, "rules.yaml", DETECTORS))
    run = {"run": "r"}
    rank = [{"run": "r", "node": "n1", "rank": str(r)} for r in (8, 9)]
    rows = [
        ("loss", run, 1.0, np.nan), ("grad_norm", run, 1.0, np.inf),  # two rules, one kind
        ("data_s", rank[0], 1.0, 2.0), ("data_s", rank[1], 1.0, 0.1),
        ("data_s", rank[0], 2.0, 2.0), ("data_s", rank[1], 2.0, 2.0),  # both ranks of n1
        ("data_s", rank[0], 3.0, 0.1), ("data_s", rank[1], 3.0, 2.0),  # rank 8 recovers first
        ("data_s", rank[0], 4.0, 0.1), ("data_s", rank[1], 4.0, 0.1),
    ]  # fmt: skip
    got = [
        (a.kind, a.state, a.ts, a.labels)
        for a in engine.process(_batch(rows))
        if a.state != "pending"
    ]
    node = {"run": "r", "node": "n1"}
    assert sorted(got, key=str) == [
        ("dataloader_bottleneck", "firing", 1.0, node),
        ("dataloader_bottleneck", "resolved", 4.0, node),
        ("nonfinite", "firing", 1.0, run),
    ]


def test_a_bitmask_threshold_fires_when_any_of_its_bits_is_set() -> None:
    rules = """\
groups:
  - name: g
    rules:
      - alert: gpu_throttled_hot
        kind: gpu_thermal
        signal: {metric: gpu.throttle_reasons, by: [node, gpu]}
        threshold: "& 0x60"
"""
    engine = Engine(parse_rules(rules, "rules.yaml", DETECTORS))
    gpu = {"run": "r", "node": "n0", "gpu": "3"}
    reasons = [0x1, 0x4, 0x40, 0x20 | 0x4, 0x0]  # idle, power cap, HW thermal, SW thermal, none
    rows = [("gpu.throttle_reasons", gpu, float(t), float(v)) for t, v in enumerate(reasons)]
    got = [(a.state, a.ts) for a in engine.process(_batch(rows)) if a.state != "pending"]
    assert got == [("firing", 2.0), ("resolved", 4.0)]


def test_members_are_compared_within_the_scope_of_the_other_by_labels() -> None:
    rules = """\
groups:
  - name: g
    rules:
      - alert: power
        kind: gpu_power_anomaly
        signal: {metric: gpu.power_w, by: [node, gpu]}
        detector: {type: peers, ratio: 1.2, min_steps: 3, bucket_s: 10, direction: both}
"""
    engine = Engine(parse_rules(rules, "rules.yaml", DETECTORS))
    rows = []
    for t in np.arange(0.0, 200.0, 10.0):
        for node, level in (("n0", 300.0), ("n1", 200.0)):  # n1 idles as a whole: no outlier
            for gpu in "0123":
                swing = node == "n0" and gpu == "2" and t >= 100
                watts = level * (1.4 if swing else 1.0)
                rows.append(("gpu.power_w", {"run": "r", "node": node, "gpu": gpu}, t, watts))
    got = [(a.state, a.labels) for a in engine.process(_batch(rows)) if a.state == "firing"]
    assert got == [("firing", {"run": "r", "node": "n0", "gpu": "2"})]


def test_alerts_say_what_the_value_was_judged_against_and_since_when() -> None:
    rules = """\
groups:
  - name: g
    rules:
      - alert: hot
        kind: gpu_thermal
        signal: {metric: gpu.temp_c, by: [node, gpu]}
        threshold: "> 80"
        annotations: {summary: "{{ $value }} over {{ $baseline }} since {{ $since }}"}
      - alert: spike
        kind: loss_spike
        signal: {metric: loss}
        detector: {type: robust_z, z: 6, warmup: 5}
      - alert: oom
        kind: log_oom
        signal: {log: {regex: "out of memory"}, by: [node]}
"""
    engine = Engine(parse_rules(rules, "rules.yaml", DETECTORS))
    gpu = {"run": "r", "node": "n0", "gpu": "1"}
    losses = [2.0, 2.1, 1.9, 2.0, 2.05, 1.95, 2.0, 9.0]
    rows = [("gpu.temp_c", gpu, 1_780_000_000.0, 86.0)]
    rows += [("loss", {"run": "r"}, float(t), v) for t, v in enumerate(losses)]
    line = Event(3.0, "log", "RuntimeError: CUDA out of memory.", {"run": "r", "node": "n0"})
    fired = {a.kind: a for a in engine.process(_batch(rows, [line])) if a.state == "firing"}
    hot, spike, oom = fired["gpu_thermal"], fired["loss_spike"], fired["log_oom"]
    assert hot.baseline == 80.0
    assert hot.annotations["summary"] == "86 over 80 since 2026-05-28 20:26:40 UTC"
    assert spike.value == 9.0 and 1.9 < (spike.baseline or 0.0) < 2.1  # the level it left
    assert oom.annotations["line"] == "RuntimeError: CUDA out of memory."


def test_checkpoint_throughput_is_judged_only_on_writes_big_enough_to_be_bound_by_bandwidth() -> (
    None
):
    engine = Engine(builtin_rules())
    node = {"run": "r", "node": "n0"}

    def checkpoint(ts: float, size: float, seconds: float) -> list[Alert]:
        return engine.process(
            _batch([("ckpt.write_s", node, ts, seconds), ("ckpt.bytes", node, ts, size)])
        )

    tiny = checkpoint(10.0, 245e3, 245e3 / 32.3e6)  # 245 KB at 32 MB/s: latency, not bandwidth
    healthy = checkpoint(20.0, 8e9, 8.0)  # 8 GB at 1 GB/s
    slow = checkpoint(30.0, 8e9, 80.0)  # 8 GB at 100 MB/s
    assert tiny == [] and healthy == []
    assert [(a.kind, a.state, a.value) for a in slow] == [
        ("checkpoint_slow", "pending", 1e8),
        ("checkpoint_slow", "firing", 1e8),
    ]
    assert checkpoint(40.0, 245e3, 1.0) == []  # a tiny one neither fires nor resolves it


def test_a_forecast_alert_tells_when_its_target_is_due() -> None:
    rules = """\
groups:
  - name: g
    rules:
      - alert: filling
        kind: forecast_disk_full
        signal: {metric: disk.free, by: [node]}
        detector: {type: trend, target: 0, horizon_s: 3600, halflife_s: 600, direction: down}
        annotations: {summary: "full in {{ $eta }}, at {{ $predicted }}"}
      - alert: hot
        kind: gpu_thermal
        signal: {metric: gpu.temp_c}
        threshold: "> 80"
        annotations: {summary: "[{{ $eta }}{{ $predicted }}]"}
"""
    engine = Engine(parse_rules(rules, "rules.yaml", DETECTORS))
    t0 = 1_780_000_000.0
    rows = [
        ("disk.free", {"run": "r", "node": "n0"}, t0 + t, 2000.0 - t) for t in range(0, 900, 10)
    ]
    rows += [("gpu.temp_c", {"run": "r"}, t0, 86.0)]
    fired = {a.kind: a for a in engine.process(_batch(rows)) if a.state == "firing"}
    filling, hot = fired["forecast_disk_full"], fired["gpu_thermal"]
    assert filling.predicted_ts is not None
    assert abs(filling.predicted_ts - (t0 + 2000.0)) < 1.0  # free space falls 1 a second
    left = round((filling.predicted_ts - filling.ts) / 60)
    assert filling.annotations["summary"] == f"full in ~{left} min, at 2026-05-28 21:00:00 UTC"
    assert hot.predicted_ts is None and hot.annotations["summary"] == "[]"  # no forecast
