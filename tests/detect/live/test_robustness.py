"""Every metric rule of the built-in pack on telemetry as it really arrives.

For each rule a healthy signal and a faulty one near the rule's threshold, generated here
(seeded), go through the live path (per-series order, the reorder buffer, the engines) clean
and under each imperfection: samples lost at random and in bursts, a gap of minutes in one
source, clock skew between nodes, batches out of order, duplicated samples, Student-t(3)
noise, and a sampling interval that changes mid-run. Healthy: no alert of the rule's kind.
Faulty: the rule's alert about the faulty entity, not before the fault and within a bound.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from stepwatch.detect import Alert, RuleSet, builtin_rules
from stepwatch.detect.live._reorder import merge
from stepwatch.model import SampleBatch

from ._hardware import (
    GB,
    ONSET_HW,
    ONSET_TREND,
    checkpoints,
    cpu,
    disk,
    filling_memory,
    flat,
    forecast_host_memory,
    gpus,
    heating,
    host,
    host_memory,
    mem_host,
    memory,
    peaks,
    store,
    swinging_power,
)
from ._telemetry import (
    NODES,
    T0,
    VARIANTS,
    Case,
    Mess,
    Signal,
    Stream,
    bound_for,
    detect,
    drained,
    sent,
    spoiled,
)

RANKS = 2  # ranks per node in the training cases (enough peers, fewer samples)
STEP_S = 0.25  # the pace of the training curves' runs
RULES = builtin_rules()


def node_of(rank: int) -> str:
    return f"node{rank // RANKS}"


# ---- training signals ---------------------------------------------------------------------


def _loss_curve(step: np.ndarray) -> np.ndarray:
    return 1.5 + 2.5 * np.exp(-step / 400.0) + 2.0 / np.sqrt(1.0 + step / 200.0)


def _steps(sig: Signal, rank: int, name: str, value: np.ndarray, ts: np.ndarray) -> Stream:
    labels = {"run": "r", "rank": str(rank), "node": node_of(rank)}
    step = np.arange(ts.size, dtype=np.int64)
    return Stream(name, labels, f"{node_of(rank)}/sdk{rank}", ts, value, step)


def _step_clock(sig: Signal, step_s: np.ndarray) -> np.ndarray:
    return T0 + np.cumsum(step_s)


def _loss(shape: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., list[Stream]]:
    def make(sig: Signal, faulty: bool) -> list[Stream]:
        ts = sig.times(STEP_S)
        step = np.arange(ts.size, dtype=np.float64)
        base = _loss_curve(step)
        loss = base * (1 + 0.01 * sig.noise(ts.size))
        if faulty:
            loss = shape(step, loss)
        return [_steps(sig, 0, "train.loss", loss, ts)]

    return make


def _grad(shape: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., list[Stream]]:
    def make(sig: Signal, faulty: bool) -> list[Stream]:
        ts = sig.times(STEP_S)
        step = np.arange(ts.size, dtype=np.float64)
        grad = (1 + 2 * np.exp(-step / 300)) * np.exp(0.1 * sig.noise(ts.size))
        if faulty:
            grad = shape(step, grad)
        return [_steps(sig, 0, "train.grad_norm", grad, ts)]

    return make


def _after(
    at: float, then: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> Callable[..., np.ndarray]:
    def shape(step: np.ndarray, value: np.ndarray) -> np.ndarray:
        out = value.copy()
        later = step >= at
        out[later] = then(step[later] - at, value[later])
        return out

    return shape


def _step_times(sig: Signal, faulty: bool) -> list[Stream]:
    n = int(sig.end_s / 1.0) + 1
    slow = 1.0 + 0.25 * (np.arange(n) >= 1200) * faulty
    step_s = slow * (1 + 0.02 * sig.noise(n))
    step_s[::500] *= 30  # evaluation pauses on every rank
    ts = _step_clock(sig, step_s)
    return [_steps(sig, 0, "train.step_time_s", step_s, ts)]


def _ranks(
    name: str, level: float, spread: float, slow: Callable[[int, np.ndarray], np.ndarray]
) -> Callable[[Signal, bool], list[Stream]]:
    """Every rank's per-step series; ``slow(rank, step)`` multiplies the faulty run's."""

    def make(sig: Signal, faulty: bool) -> list[Stream]:
        ts = sig.times(1.0)
        step = np.arange(ts.size)
        pause = np.where(step % 200 == 0, 30.0, 1.0)  # every rank waits out an evaluation
        out = []
        for rank in range(NODES * RANKS):
            factor = slow(rank, step) if faulty else 1.0
            value = level * pause * factor * (1 + spread * sig.noise(ts.size))
            out.append(_steps(sig, rank, name, np.abs(value), ts))
        return out

    return make


def _data_wait(sig: Signal, faulty: bool) -> list[Stream]:
    ts = sig.times(1.0)
    step = np.arange(ts.size)
    out = []
    for rank in range(RANKS, 2 * RANKS):  # the ranks of node1
        compute = 0.5 * (1 + 0.02 * sig.noise(ts.size))
        share = np.where(faulty & (step >= 400), 0.3, 0.05)
        data = compute * share * (1 + 0.05 * sig.noise(ts.size))
        out.append(_steps(sig, rank, "train.compute_time_s", compute, ts))
        out.append(_steps(sig, rank, "train.data_time_s", np.abs(data), ts))
    return out


def _nodes(sig: Signal, faulty: bool) -> list[Stream]:
    out = []
    for node in range(NODES):
        ts = sig.times(5.0)
        if faulty and node == 1:
            ts = ts[ts - T0 < ONSET_HW]
        labels = {"run": "r", "node": f"node{node}"}
        cpu = 50 + 5 * sig.noise(ts.size)
        out.append(Stream("stepwatch.heartbeat_s", labels, f"node{node}/sdk", ts, ts - T0))
        out.append(Stream("host.cpu_pct", labels, f"node{node}/agent", ts, cpu))
        out.append(Stream("gpu.util_pct", {**labels, "gpu": "0"}, f"node{node}/agent", ts, cpu))
    return out


def _agent_pause(sig: Signal, faulty: bool) -> list[Stream]:
    """Every node's agent and one rank's process; faulty: node1's agent pauses from the onset
    while its rank goes on stepping (an agent restart that outlasts the timeout)."""
    out = []
    for node in range(NODES):
        labels = {"run": "r", "node": f"node{node}"}
        steps = sig.times(1.0)
        rank = {**labels, "rank": str(node)}
        step = np.arange(steps.size, dtype=np.int64)
        value = 1.0 + 0.01 * sig.noise(steps.size)
        out.append(Stream("train.step_time_s", rank, f"node{node}/sdk", steps, value, step))
        ts = sig.times(5.0)
        if faulty and node == 1:
            ts = ts[(ts - T0 < ONSET_HW) | (ts - T0 >= ONSET_HW + 150)]
        cpu = 50 + 5 * sig.noise(ts.size)
        out.append(Stream("host.cpu_pct", labels, f"node{node}/agent", ts, cpu))
        out.append(Stream("gpu.util_pct", {**labels, "gpu": "0"}, f"node{node}/agent", ts, cpu))
    return out


def _ratio(rank: int, at: float, times: float) -> Callable[[int, np.ndarray], np.ndarray]:
    return lambda r, step: np.where((r == rank) & (step >= at), times, 1.0)


def _node_ratio(node: int, at: float, times: float) -> Callable[[int, np.ndarray], np.ndarray]:
    return lambda r, step: np.where((r // RANKS == node) & (step >= at), times, 1.0)


RUN = {"run": "r"}
GPU1 = {"run": "r", "node": "node1", "gpu": "1"}
NODE1 = {"run": "r", "node": "node1"}
SDK0 = "node0/sdk0"


def _curve(rule: str, make: Callable[[Signal, bool], list[Stream]], at: int, within: int) -> Case:
    """A training-curve case: the fault from step ``at``, found within ``within`` steps."""
    return Case(rule, make, at * STEP_S, within * STEP_S, RUN, SDK0, True)


def _flat_from(at: float) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The loss stops falling at step ``at``: the same noise about the level it had reached."""
    return _after(at, lambda s, v: v / _loss_curve(s + at) * _loss_curve(np.full(s.shape, at)))


CASES = [
    _curve("nonfinite_loss", _loss(_after(600, lambda s, v: np.full(v.shape, np.nan))), 600, 5),
    _curve(
        "nonfinite_grad_norm", _grad(_after(600, lambda s, v: np.full(v.shape, np.inf))), 600, 5
    ),
    _curve(
        "loss_spike", _loss(_after(900, lambda s, v: v * (1 + 0.15 * np.exp(-s / 20)))), 900, 20
    ),
    _curve("loss_divergence", _loss(_after(1500, lambda s, v: v * (1 + 0.001 * s))), 1500, 400),
    _curve("loss_blowup", _loss(_after(1500, lambda s, v: v * 1.2**s)), 1500, 30),
    _curve("loss_plateau", _loss(_flat_from(4000)), 4000, 1500),
    _curve("grad_explosion", _grad(_after(900, lambda s, v: np.where(s < 10, v * 30, v))), 900, 3),
    _curve("grad_vanishing", _grad(_after(900, lambda s, v: 1e-9 * v)), 900, 30),
    Case("step_time_regression", _step_times, 1200, 800, RUN, SDK0),
    Case(
        "straggler",
        _ranks("train.compute_time_s", 0.5, 0.02, _ratio(3, 400, 1.25)),
        400,
        30,
        {"run": "r", "rank": "3"},
        "node1/sdk3",
        True,
    ),
    Case("dataloader_bottleneck", _data_wait, 400, 150, NODE1, "node1/sdk3"),
    Case(
        "sync_latency",
        _ranks("train.comm_time_s", 0.2, 0.05, _node_ratio(1, 400, 1.6)),
        400,
        300,
        NODE1,
        "node1/sdk3",
    ),
    Case("node_down", _nodes, ONSET_HW, 90, NODE1),
    # a gap in one producer is this rule's fault itself: the gap variant silences no source
    Case("telemetry_gap", _agent_pause, ONSET_HW, 75, {**NODE1, "producer": "agent"}, "none"),
    Case(
        "gpu_underutilized",
        gpus("gpu.util_pct", peaks(92.0, 10.0, 600.0, 30.0), 50.0, 3.0),
        ONSET_HW,
        660,
        GPU1,
    ),
    Case(
        "gpu_thermal",
        gpus("gpu.temp_c", peaks(72.0, 84.0, 300.0, 20.0), 81.0, 0.5),
        ONSET_HW,
        330,
        GPU1,
    ),
    Case(
        "gpu_thermal_throttle",
        gpus("gpu.throttle_reasons", flat(4.0), 0x40, 0.0),
        ONSET_HW,
        45,
        GPU1,
    ),
    Case("gpu_power_anomaly", swinging_power, ONSET_HW, 200, GPU1),
    Case("gpu_memory_pressure", memory, ONSET_HW, 90, GPU1),
    Case("gpu_xid", gpus("gpu.xid_errors", flat(0.0), 1.0, 0.0), ONSET_HW, 10, GPU1),
    Case("gpu_ecc", gpus("gpu.ecc_errors", flat(0.0), 2.0, 0.0), ONSET_HW, 10, GPU1),
    Case(
        "host_memory_leak",
        host("host.mem_used_bytes", mem_host, lambda t, v: v * (1 + 0.08 * t / 3600), ONSET_TREND),
        ONSET_TREND,
        3600,
        NODE1,
    ),
    Case("host_memory_filling", host_memory, ONSET_HW, 180, NODE1),
    Case("forecast_oom", filling_memory, ONSET_TREND, 600, GPU1),
    Case("forecast_thermal", heating, ONSET_TREND, 1380, GPU1),
    Case("forecast_host_oom", forecast_host_memory, ONSET_TREND, 1500, NODE1),
    Case(
        "forecast_disk_full",
        host("host.disk_free_bytes", disk, lambda t, v: v - 300 * GB * t / 3600, ONSET_TREND),
        ONSET_TREND,
        2400,
        NODE1,
    ),
    Case(
        "cpu_saturation",
        host("host.cpu_core_max_pct", cpu, lambda t, v: np.full(v.shape, 100.0)),
        ONSET_HW,
        330,
        NODE1,
    ),
    Case(
        "disk_full",
        host("host.disk_free_bytes", disk, lambda t, v: np.full(v.shape, 8 * GB)),
        ONSET_HW,
        75,
        NODE1,
    ),
    Case(
        "disk_filling",
        host("host.disk_free_bytes", disk, lambda t, v: v - 300 * GB * t / 3600, ONSET_TREND),
        ONSET_TREND,
        2400,
        NODE1,
    ),
    Case("checkpoint_slow", checkpoints, ONSET_HW, 310, NODE1, "node1/sdk2", True),
    Case("store_disk_full", store, ONSET_HW, 40, {}, "stepwatch.collector", True),
]
BY_RULE = {case.rule: case for case in CASES}


def _run(case: Case, mess: Mess, faulty: bool, seed: int) -> tuple[list[Alert], float]:
    rng = np.random.default_rng(seed)
    bound = bound_for(case, mess)
    sig = Signal(rng, mess, case.onset_s + bound + 120.0)
    streams = spoiled(case, case.make(sig, faulty), mess, rng)
    return _detect(drained(streams, mess, rng), _kind(case.rule)), bound


def _detect(batches: list[SampleBatch], kind: str) -> list[Alert]:
    """The firing alerts of the built-in rules of ``kind``."""
    return detect(batches, RuleSet(tuple(r for r in RULES.rules if r.kind == kind)))


def _kind(rule: str) -> str:
    return next(r.kind for r in RULES.rules if r.alert == rule)


def _said(alerts: list[Alert]) -> str:
    return "; ".join(f"{a.rule.alert} {a.labels} at {a.ts - T0:.0f}s" for a in alerts)


# ---- the tests ----------------------------------------------------------------------------


def test_every_metric_rule_of_the_builtin_pack_has_a_case() -> None:
    metric_rules = {r.alert for r in RULES.rules if r.signal.metrics}
    assert metric_rules == set(BY_RULE)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("rule", list(BY_RULE))
def test_healthy_telemetry_raises_no_alert_of_the_kind(rule: str, variant: str) -> None:
    case = BY_RULE[rule]
    alerts, _ = _run(case, VARIANTS[variant], False, 7)
    assert not alerts, _said(alerts)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("rule", list(BY_RULE))
def test_a_fault_near_the_threshold_is_found_in_time(rule: str, variant: str) -> None:
    case = BY_RULE[rule]
    alerts, bound = _run(case, VARIANTS[variant], True, 11)
    mine = [a for a in alerts if a.rule.alert == rule and a.labels.items() >= case.entity.items()]
    assert mine, f"no {rule} within {bound:.0f}s: {_said(alerts)}"
    delay = mine[0].ts - T0 - case.onset_s
    assert -2.0 <= delay <= bound, f"{rule} {delay:.0f}s after the onset: {_said(alerts)}"


def test_a_sample_sent_twice_counts_once_toward_for_n_samples() -> None:
    def sent_twice(vanishing_s: float) -> list[SampleBatch]:
        t = np.arange(300.0)
        grad = np.where((t >= 100) & (t < 100 + vanishing_s), 1e-9, 1.0)
        stream = Stream("train.grad_norm", {"run": "r", "rank": "0"}, "sdk", T0 + t, grad, t)
        stream.step = np.arange(t.size, dtype=np.int64)
        batches = sent("sdk", [stream], Mess(), np.random.default_rng(0))
        return [merge([batch, batch]) for _, batch in batches]  # each arrives again, new seq

    assert _detect(sent_twice(12), "grad_vanishing") == []  # 12 steps, 24 samples: not 20
    assert [a.ts - T0 for a in _detect(sent_twice(25), "grad_vanishing")] == [119.0]
