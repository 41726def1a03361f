"""The Run offline: what log/event/finish put in the spool, labels, ids, validation, the cap."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import stepwatch
from stepwatch.model import Event
from stepwatch.sdk import Run

MakeRun = Callable[..., Run]
Spooled = Callable[[Path], tuple[list[tuple[str, dict[str, str], int, float]], list[Event]]]


def run_json(run: Run) -> dict[str, object]:
    return json.loads((run.spool_dir.parent / "run.json").read_text())  # type: ignore[no-any-return]


def test_logged_values_reach_the_spool_exactly(spooled: Spooled, make_run: MakeRun) -> None:
    run = make_run(run_id="r1", config={"lr": 3e-4, "path": Path("/data")})
    run.log({"loss": 2.5, "lr": np.float32(0.5), "grad_norm": math.nan}, step=0)
    run.log({"loss": math.inf, "custom.metric": 7}, step=1)
    run.log({"host.temp": -math.inf})
    run.finish()
    samples, _ = spooled(run.spool_dir)
    got = [(name, step, value) for name, _, step, value in samples]
    assert got[:2] == [("train.loss", 0, 2.5), ("train.lr", 0, 0.5)]
    assert got[2][:2] == ("train.grad_norm", 0) and math.isnan(got[2][2])
    assert got[3:] == [
        ("train.loss", 1, math.inf),
        ("custom.metric", 1, 7.0),
        ("host.temp", -1, -math.inf),
    ]
    assert {"run": "r1", "node": "host0"} == samples[0][1]
    meta = run_json(run)
    assert meta["status"] == "finished" and meta["config"] == {"lr": 3e-4, "path": "/data"}


def test_a_log_without_step_lands_on_the_last_run_step(spooled: Spooled, make_run: MakeRun) -> None:
    run = make_run()
    run.log({"loss": 1.0})  # before any step: none
    for i in (4, 5):
        with run.step(i):
            run.log({"loss": float(i)})
        run.log({"lr": 0.1})  # after the block: still that step
    run.log({"loss": 9.0}, step=100)  # an explicit step wins
    run.finish()
    samples, _ = spooled(run.spool_dir)
    got = [(name, step) for name, _, step, _ in samples if name in ("train.loss", "train.lr")]
    assert got == [
        ("train.loss", -1),
        ("train.loss", 4),
        ("train.lr", 4),
        ("train.loss", 5),
        ("train.lr", 5),
        ("train.loss", 100),
    ]


def test_a_bad_call_raises_at_the_call_site_and_appends_nothing(
    spooled: Spooled, make_run: MakeRun
) -> None:
    run = make_run()
    with pytest.raises(TypeError, match="'acc'"):
        run.log({"loss": 1.0, "acc": "0.9"}, step=0)
    with pytest.raises(TypeError, match="'loss'"):
        run.log({"loss": [1.0]}, step=0)
    with pytest.raises(ValueError, match="invalid metric name"):
        run.log({"loss": 1.0, "bad name!": 1.0}, step=0)
    with pytest.raises(TypeError, match="metric name must be a str"):
        run.log({3: 1.0})
    with pytest.raises(TypeError, match="dict of name"):
        run.log([("loss", 1.0)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step"):
        run.log({"loss": 1.0}, step=-5)
    with pytest.raises(TypeError, match="label"):
        run.log({"loss": 1.0}, labels={"phase": [1]})
    run.log({"loss": 1.0}, step=9)
    run.finish()
    samples, _ = spooled(run.spool_dir)
    assert [(n, s, v) for n, _, s, v in samples] == [("train.loss", 9, 1.0)]


def test_identity_comes_from_arguments_then_the_launcher_environment(tmp_path: Path) -> None:
    environ = {
        "STEPWATCH_RUN_ID": "shared-7",
        "STEPWATCH_DIR": str(tmp_path / "envdir"),
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "8",
    }
    run = Run(project="p", environ=environ, hostname="gpu-node-2", labels={"node": "n2"})
    try:
        assert run.id == "shared-7" and run.server is None
        assert run.spool_dir.parent == tmp_path / "envdir" / "shared-7"
        assert run.labels == {
            "run": "shared-7",
            "node": "n2",
            "rank": "3",
            "local_rank": "1",
            "world_size": "8",
        }
    finally:
        run.finish()
    assert run_json(run)["labels"] == {"world_size": "8"}


def test_generated_run_ids_are_unique_and_bad_ones_refused(make_run: MakeRun) -> None:
    assert make_run().id != make_run().id
    with pytest.raises(ValueError, match="invalid run id"):
        make_run(run_id="../escape")


def test_per_call_labels_make_their_own_series(spooled: Spooled, make_run: MakeRun) -> None:
    run = make_run(run_id="r2")
    run.log({"loss": 1.0}, step=0, labels={"split": "val"})
    run.log({"loss": 2.0}, step=0)
    run.log({"loss": 3.0}, step=1, labels={"split": "val", "run": "other"})
    run.finish()
    samples, _ = spooled(run.spool_dir)
    assert [(labels.get("split"), labels["run"], v) for _, labels, _, v in samples] == [
        ("val", "r2", 1.0),
        (None, "r2", 2.0),
        ("val", "r2", 3.0),
    ]


def test_events_travel_with_the_batch(spooled: Spooled, make_run: MakeRun) -> None:
    run = make_run(run_id="r3")
    run.event("checkpoint", "saved step 100", step=100, path="/ckpt/100.pt")
    with pytest.raises(TypeError, match="JSON"):
        run.event("checkpoint", bad=object())
    with pytest.raises(TypeError, match="JSON"):
        run.event("checkpoint", bad=math.nan)
    with pytest.raises(ValueError, match="kind 'alert' is reserved"):
        run.event("alert", "raised by hand", rule="loader_stall")
    run.finish()
    _, events = spooled(run.spool_dir)
    (event,) = events
    assert (event.kind, event.text, event.data) == (
        "checkpoint",
        "saved step 100",
        {"step": 100, "path": "/ckpt/100.pt"},
    )
    assert event.labels["run"] == "r3"


def test_many_runs_in_one_process_keep_separate_sources(
    spooled: Spooled, make_run: MakeRun
) -> None:
    runs = [make_run(run_id="big", labels={"rank": r, "node": f"n{r // 2}"}) for r in range(4)]
    for step in range(3):
        for r, run in enumerate(runs):
            run.log({"train.compute_time_s": r + step / 10}, step=step)
    for run in runs:
        run.finish()
    assert len({run.source for run in runs}) == 4
    for r, run in enumerate(runs):
        samples, _ = spooled(run.spool_dir)
        assert [v for *_, v in samples] == [r, r + 0.1, r + 0.2]
        assert {labels["rank"] for _, labels, _, _ in samples} == {str(r)}


def test_context_manager_marks_a_failed_run(make_run: MakeRun) -> None:
    run = make_run()
    with pytest.raises(ZeroDivisionError), run:
        run.log({"loss": 1.0}, step=0)
        _ = 1 / 0
    assert run.finished and run_json(run)["status"] == "failed"
    with pytest.raises(RuntimeError, match="finished"):
        run.log({"loss": 1.0})
    run.finish()  # a second finish is a no-op


def test_finish_refuses_an_unknown_status(make_run: MakeRun) -> None:
    with pytest.raises(ValueError, match="status"):
        make_run().finish("done")


def test_module_level_log_and_finish_act_on_the_current_run(
    spooled: Spooled, tmp_path: Path
) -> None:
    with pytest.raises(RuntimeError, match="init"):
        stepwatch.log({"loss": 1.0})
    run = stepwatch.init(dir=tmp_path, run_id="mod", labels={"node": "n0"}, heartbeat_s=None)
    assert stepwatch.sdk.current_run() is run
    stepwatch.log({"loss": 0.5}, step=1)
    stepwatch.finish()
    assert run.finished and stepwatch.sdk.current_run() is None
    samples, _ = spooled(run.spool_dir)
    assert [(n, s, v) for n, _, s, v in samples] == [("train.loss", 1, 0.5)]


def test_reaching_flush_samples_flushes_before_the_interval(
    spooled: Spooled, make_run: MakeRun
) -> None:
    run = make_run(flush_interval_s=3600, flush_samples=10)
    for step in range(5):
        run.log({"a": 1.0, "b": 2.0}, step=step)
    deadline = time.monotonic() + 30
    while not spooled(run.spool_dir)[0] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(spooled(run.spool_dir)[0]) == 10


def test_flush_makes_everything_logged_durable(spooled: Spooled, make_run: MakeRun) -> None:
    run = make_run(flush_interval_s=3600)
    run.log({"loss": 1.0, "lr": 0.1}, step=0)
    assert run.durable_samples == 0
    run.flush()
    assert run.durable_samples == 2
    samples, _ = spooled(run.spool_dir)
    assert [v for *_, v in samples] == [1.0, 0.1]


def test_a_full_spool_drops_batches_counts_them_and_warns_once(
    spooled: Spooled, make_run: MakeRun, caplog: pytest.LogCaptureFixture
) -> None:
    run = make_run(flush_interval_s=3600, max_spool_bytes=4096)
    with caplog.at_level(logging.WARNING, logger="stepwatch"):
        for step in range(20):
            run.log({f"m{j}": float(j) for j in range(10)}, step=step)
            run.flush()
    assert run.dropped_samples > 0 and run.dropped_samples % 10 == 0
    assert sum("is full" in r.message for r in caplog.records) == 1
    samples, _ = spooled(run.spool_dir)
    assert len(samples) + run.dropped_samples == 200


def test_the_last_line_says_what_was_spooled_and_where_it_waits(
    make_run: MakeRun, caplog: pytest.LogCaptureFixture
) -> None:
    run = make_run(run_id="r-last")
    run.log({"loss": 1.0, "lr": 0.1}, step=0)
    with caplog.at_level(logging.INFO, logger="stepwatch"):
        run.finish()
    (line,) = [r for r in caplog.records if "run r-last" in r.getMessage()]
    assert line.levelno == logging.INFO  # nothing lost: no warning
    assert line.getMessage() == (
        f"stepwatch: run r-last finished: 2 samples spooled; offline: "
        f"`stepwatch sync {run.spool_dir.parent} --server URL` uploads it"
    )
