"""Training metrics from the lines frameworks print: each format's real lines, exact values,
NaN kept, evaluation lines left alone, malformed numbers counted, and the agent shipping them."""

from __future__ import annotations

import io
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepwatch.collect import PARSE_ERRORS, LogTail, MetricLines, OutputPump, Reading, StepMetrics
from stepwatch.collect._log_metrics import (
    GRAD_NORM,
    LOSS,
    LR,
    SAMPLES_PER_S,
    STEP_TIME,
    TOKENS_PER_S,
    TOKENS_PER_S_PER_GPU,
)
from stepwatch.model import Event

NAN = float("nan")


def _read(fmt: str, *lines: str) -> list[StepMetrics]:
    parser = MetricLines(fmt)
    return [found for line in lines for found in parser.feed(line)]


def _same(found: list[StepMetrics], expected: list[tuple[int, dict[str, float]]]) -> None:
    """``found`` holds exactly ``expected`` (NaN equal to NaN, floats to 1e-12 relative)."""
    assert [(m.step, sorted(m.values)) for m in found] == [
        (step, sorted(values)) for step, values in expected
    ]
    for m, (_, values) in zip(found, expected, strict=True):
        for name, value in values.items():
            got = m.values[name]
            assert (math.isnan(got) and math.isnan(value)) or got == pytest.approx(value, 1e-12)


# Megatron-LM's training_log, as print_rank_last writes it (Megatron-Core 0.x layout).
MEGATRON = (
    " [2024-05-01 12:00:00.123456] iteration      100/  500000 | consumed samples:        51200 |"
    " elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 187.3 |"
    " learning rate: 3.000000E-04 | global batch size:   512 | lm loss: 2.345678E+00 |"
    " loss scale: 1.0 | grad norm: 0.987 | number of skipped iterations:   0 |"
    " number of nan iterations:   0 |"
)
# A NaN loss is not averaged into the line: only the nan count says it happened.
MEGATRON_NAN = (
    " [2024-05-01 12:02:03.654321] iteration      110/  500000 | consumed samples:        56320 |"
    " elapsed time per iteration (ms): 1230.1 | learning rate: 3.000000E-04 |"
    " global batch size:   512 | loss scale: 1.0 | grad norm: nan |"
    " number of skipped iterations:   0 | number of nan iterations:   1 |"
)
# fp16 overflow: every iteration of the interval skipped, the empty average printed as 0.
MEGATRON_SKIPPED = (
    " [2024-05-01 12:04:06.000001] iteration      120/  500000 | consumed samples:        61440 |"
    " elapsed time per iteration (ms): 1101.9 | learning rate: 3.000000E-04 |"
    " global batch size:   512 | lm loss: 0.000000E+00 | loss scale: 32768.0 |"
    " number of skipped iterations:  10 | number of nan iterations:   0 |"
)
# One skipped iteration of ten: the loss is the average of the nine others.
MEGATRON_ONE_SKIPPED = (
    " [2024-05-01 12:06:09.000001] iteration      130/  500000 | consumed samples:        66560 |"
    " elapsed time per iteration (ms): 1200.0 | learning rate: 2.990000E-04 |"
    " global batch size:   512 | lm loss: 2.301000E+00 | loss scale: 65536.0 |"
    " grad norm: 1.250 | number of skipped iterations:   1 | number of nan iterations:   0 |"
)
MEGATRON_VALIDATION = (
    " validation loss at iteration 100 | lm loss value: 2.298765E+00 | lm loss PPL: 9.962541E+00 | "
)
# Megatron-DeepSpeed adds throughput fields.
MEGATRON_DEEPSPEED = (
    "iteration      199/  317892 | consumed samples:       152832 | consumed tokens:    625999872 |"
    " elapsed time per iteration (ms): 14287.5 | learning rate: 2.407E-04 |"
    " global batch size:   768 | lm loss: 5.905366E+00 | loss scale: 8192.0 |"
    " actual seqlen:  4096 | number of skipped iterations:   0 | number of nan iterations:   0 |"
    " samples per second: 53.753 | tokens per gpu per second (tgs): 6880.384 | TFLOPs: 201.36 |"
)


def test_megatron_lines_give_loss_lr_grad_norm_and_step_time_in_seconds() -> None:
    _same(
        _read("megatron", MEGATRON, MEGATRON_ONE_SKIPPED),
        [
            (100, {LOSS: 2.345678, LR: 3e-4, GRAD_NORM: 0.987, STEP_TIME: 1.2345}),
            (130, {LOSS: 2.301, LR: 2.99e-4, GRAD_NORM: 1.25, STEP_TIME: 1.2}),
        ],
    )


def test_megatron_nan_iterations_are_a_nan_loss_and_all_skipped_ones_no_loss() -> None:
    _same(
        _read("megatron", MEGATRON_NAN, MEGATRON_SKIPPED),
        [
            (110, {LOSS: NAN, LR: 3e-4, GRAD_NORM: NAN, STEP_TIME: 1.2301}),
            (120, {LR: 3e-4, STEP_TIME: 1.1019}),
        ],
    )


def test_megatron_validation_lines_are_not_training_loss() -> None:
    assert _read("megatron", MEGATRON_VALIDATION) == []


def test_megatron_deepspeed_throughput_gives_samples_and_tokens_per_second() -> None:
    _same(
        _read("megatron", MEGATRON_DEEPSPEED),
        [
            (
                199,
                {
                    LOSS: 5.905366,
                    LR: 2.407e-4,
                    STEP_TIME: 14.2875,
                    SAMPLES_PER_S: 53.753,
                    TOKENS_PER_S: 53.753 * 4096,
                    TOKENS_PER_S_PER_GPU: 6880.384,
                },
            )
        ],
    )


def test_deepspeed_progress_lr_and_throughput_lines() -> None:
    lines = [
        "[2024-05-01 12:00:00,101] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW!"
        " Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
        "[2024-05-01 12:00:01,935] [INFO] [logging.py:96:log_dist] [Rank 0] step=100, skipped=1,"
        " lr=[2.9999999999999997e-05, 2.9999999999999997e-05], mom=[(0.9, 0.95), (0.9, 0.95)]",
        "[2024-05-01 12:00:01,936] [INFO] [timer.py:260:stop] epoch=0/micro_step=400/"
        "global_step=100, RunningAvgSamplesPerSec=220.69530887096045,"
        " CurrSamplesPerSec=222.88787331278564, MemAllocated=4.32GB, MaxMemAllocated=38.49GB",
        "steps: 100 loss: 2.3456 iter time (s): 1.234 samples/sec: 415.600",
        "steps: 110 loss: nan moe_loss: 0.0123 iter time (s): 1.240 samples/sec: 412.903",
    ]
    _same(
        _read("deepspeed", *lines),
        [
            (100, {LR: 2.9999999999999997e-05}),
            (100, {SAMPLES_PER_S: 222.88787331278564}),
            (100, {LOSS: 2.3456, STEP_TIME: 1.234, SAMPLES_PER_S: 415.6}),
            (110, {LOSS: NAN, STEP_TIME: 1.24, SAMPLES_PER_S: 412.903}),
        ],
    )


# NeMo 1.x: PyTorch Lightning's bar, with NeMo's metrics in its postfix.
NEMO_BAR = (
    "Epoch 0:  10%|█         | 100/1000 [01:40<15:00,  1.00it/s, loss=2.35, v_num=0,"
    " reduced_train_loss=2.340, global_step=99.00, consumed_samples=25600.0,"
    " train_step_timing in s=1.010]"
)


def test_nemo_bar_postfix_gives_reduced_train_loss_and_step_timing_at_global_step() -> None:
    later = (
        "Epoch 0: : 47%|████▋     | 7/15 [06:19<07:13, reduced_train_loss=nan, global_step=100.0,"
        " consumed_samples=12288.0, train_step_timing in s=49.50, val_loss=0.212]"
    )
    _same(
        _read("nemo", NEMO_BAR, later),
        [(99, {LOSS: 2.34, STEP_TIME: 1.01}), (100, {LOSS: NAN, STEP_TIME: 49.5})],
    )


def test_a_redrawn_bar_is_read_once_and_val_loss_is_never_the_loss() -> None:
    redrawn = NEMO_BAR.replace("01:40<15:00,  1.00it/s", "01:41<15:00,  0.99it/s")
    eval_only = (
        "Epoch 1: 100%|██████████| 1000/1000 [16:40<00:00,  1.00it/s, v_num=0, val_loss=1.950]"
    )
    _same(_read("nemo", NEMO_BAR, redrawn, eval_only), [(99, {LOSS: 2.34, STEP_TIME: 1.01})])


def test_a_bar_step_rounded_to_three_digits_follows_the_last_step() -> None:
    def bar(step: str, loss: str) -> str:
        return (
            f"Epoch 0:  12%|█▏        | 123457/1000000 [34:17:37<243:29:01,  1.00it/s, v_num=0,"
            f" reduced_train_loss={loss}, global_step={step}, consumed_samples=3.16e+7]"
        )

    found = _read("nemo", bar("123455.0", "1.901"), bar("1.23e+5", "1.900"), bar("2e+5", "1.5"))
    assert [m.step for m in found] == [123455, 123456, 200000]


def test_nemo2_lines_with_a_launcher_prefix() -> None:
    lines = [
        "0: Training epoch 0, iteration 0/99 | lr: 9.804e-08 | global_batch_size: 4 |"
        " global_step: 0 | reduced_train_loss: 14.66 | train_step_timing in s: 5.276",
        "0: Training epoch 0, iteration 28/99 | lr: 5.6e-06 | global_batch_size: 32 |"
        " global_step: 28 | reduced_train_loss: 2.778 | train_step_timing in s: 0.189 |"
        " tokens_per_sec_per_gpu: 1.073e+04 | consumed_samples: 928 | val_loss: 2.861 |"
        " val_ppl: 17.57",
    ]
    _same(
        _read("nemo", *lines),
        [
            (0, {LOSS: 14.66, LR: 9.804e-08, STEP_TIME: 5.276}),
            (28, {LOSS: 2.778, LR: 5.6e-06, STEP_TIME: 0.189, TOKENS_PER_S_PER_GPU: 10730.0}),
        ],
    )


# torchtitan's metrics line, colours and all, from rank 0 under torchrun's --tee.
TITAN = (
    "[rank0]:[titan] 2025-03-01 10:00:00,123 - root - INFO - \x1b[31mstep: 10  \x1b[32mloss:"
    "  9.8765  \x1b[38;2;180;60;0mgrad_norm:  1.2345  \x1b[38;2;54;234;195mmemory:"
    " 12.34GiB(15.61%)  \x1b[34mtps: 1,234  \x1b[36mtflops: 56.78  \x1b[35mmfu: 12.34%\x1b[39m"
)


def test_torchtitan_line_through_its_colours_with_its_rank() -> None:
    nan_line = TITAN.replace("step: 10", "step: 20").replace("9.8765", "   nan")
    found = _read("torchtitan", TITAN, nan_line)
    _same(
        found,
        [
            (10, {LOSS: 9.8765, GRAD_NORM: 1.2345, TOKENS_PER_S_PER_GPU: 1234.0}),
            (20, {LOSS: NAN, GRAD_NORM: 1.2345, TOKENS_PER_S_PER_GPU: 1234.0}),
        ],
    )
    assert {m.rank for m in found} == {"0"}


def test_torchtitan_validation_lines_are_not_training_loss() -> None:
    validation = (
        "[titan] 2025-03-01 10:05:00,000 - root - INFO - \x1b[33mvalidate step: 100  \x1b[32mloss:"
        "  3.2101  \x1b[38;2;54;234;195mmemory: 12.01GiB(15.19%)  \x1b[34mtps: 3,456\x1b[39m"
    )
    assert _read("torchtitan", validation) == []


def test_hf_trainer_dicts_count_their_steps_and_keep_nan() -> None:
    lines = [
        "{'loss': 2.3456, 'grad_norm': 1.2345678, 'learning_rate': 4.9e-05, 'epoch': 0.1}",
        " 20%|██        | 100/500 [00:50<03:20,  2.00it/s]",
        "{'loss': nan, 'grad_norm': nan, 'learning_rate': 4.8e-05, 'epoch': 0.2}",
        "{'loss': 2.1, 'grad_norm': tensor(0.9876, device='cuda:0'),"
        " 'learning_rate': np.float64(4.7e-05), 'epoch': 0.3}",
    ]
    _same(
        _read("hf", *lines),
        [
            (1, {LOSS: 2.3456, GRAD_NORM: 1.2345678, LR: 4.9e-05}),
            (2, {LOSS: NAN, GRAD_NORM: NAN, LR: 4.8e-05}),
            (3, {LOSS: 2.1, GRAD_NORM: 0.9876, LR: 4.7e-05}),
        ],
    )


def test_hf_eval_and_summary_lines_are_not_training_loss_and_take_no_step() -> None:
    lines = [
        "{'eval_loss': 2.0123, 'eval_runtime': 12.34, 'eval_samples_per_second': 81.04,"
        " 'eval_steps_per_second': 10.13, 'epoch': 1.0}",
        "{'loss': 1.9, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': 1.01}",
        "{'train_runtime': 1234.5678, 'train_samples_per_second': 12.345,"
        " 'train_steps_per_second': 0.386, 'train_loss': 2.4567, 'epoch': 3.0}",
    ]
    _same(_read("hf", *lines), [(1, {LOSS: 1.9, GRAD_NORM: 0.5, LR: 1e-05})])


def test_hf_step_is_the_global_step_when_the_dict_has_one() -> None:
    line = "{'loss': 0.6931, 'learning_rate': '5e-05', 'epoch': 0.05, 'global_step': 500}"
    _same(_read("hf", line), [(500, {LOSS: 0.6931, LR: 5e-05})])


ONE_OF_EACH = {
    "megatron": MEGATRON,
    "deepspeed": "steps: 100 loss: 2.3456 iter time (s): 1.234 samples/sec: 415.600",
    "nemo": NEMO_BAR,
    "torchtitan": TITAN,
    "hf": "{'loss': 2.3456, 'grad_norm': 1.2, 'learning_rate': 4.9e-05, 'epoch': 0.1}",
}


@pytest.mark.parametrize("fmt", sorted(ONE_OF_EACH))
def test_auto_settles_on_the_first_format_that_reads_a_line(fmt: str) -> None:
    parser = MetricLines("auto")
    assert parser.feed("loading checkpoint from /ckpt/iter_0000100") == []
    assert parser.format is None
    assert len(parser.feed(ONE_OF_EACH[fmt])) == 1
    assert parser.format == fmt
    others = [line for name, line in ONE_OF_EACH.items() if name != fmt]
    assert [found for line in others for found in parser.feed(line)] == []


def test_malformed_numbers_are_skipped_and_counted() -> None:
    parser = MetricLines("megatron")
    bad = MEGATRON.replace("2.345678E+00", "2.34.5678E+00").replace("0.987", "n/a")
    _same(parser.feed(bad), [(100, {LR: 3e-4, STEP_TIME: 1.2345})])
    assert parser.malformed == 2
    found = parser.feed(MEGATRON.replace("     100/", "   1e3x/"))
    assert found == [] and parser.malformed == 2  # no iteration number: no Megatron line


def test_the_count_of_malformed_numbers_becomes_a_sample_when_it_grows() -> None:
    parser = MetricLines("torchtitan")
    found = parser.feed(TITAN.replace("1.2345", "1.2.3"))
    samples = parser.samples(found, {"path": "/logs/train.log"})
    by_name = {s.name: s for s in samples}
    assert by_name[LOSS].step == 10 and by_name[LOSS].labels == {"rank": "0"}
    assert (by_name[PARSE_ERRORS].value, by_name[PARSE_ERRORS].step) == (1.0, None)
    assert by_name[PARSE_ERRORS].labels == {"path": "/logs/train.log"}
    assert PARSE_ERRORS not in {s.name for s in parser.samples(parser.feed(TITAN), {})}


def test_unknown_formats_are_refused() -> None:
    with pytest.raises(ValueError, match="megatron"):
        MetricLines("wandb")


@given(st.text(max_size=300))
def test_no_line_makes_a_parser_raise(text: str) -> None:
    for fmt in ("auto", "megatron", "deepspeed", "nemo", "torchtitan", "hf"):
        for found in MetricLines(fmt).feed(text):
            assert found.step >= 0


def test_bytes_split_at_newlines_and_carriage_returns_across_chunks() -> None:
    parser = MetricLines("nemo")
    stream = (
        f"\r{NEMO_BAR}\r{NEMO_BAR.replace('99.00', '100.0').replace('2.340', '2.330')}"
        f"\r{NEMO_BAR.replace('99.00', '101.0').replace('2.340', '2.320')}"
    ).encode()
    found = [m for i in range(0, len(stream), 7) for m in parser.push(stream[i : i + 7])]
    assert [m.step for m in found] == [99, 100]  # the last drawing is not finished yet
    assert [m.step for m in parser.finish()] == [101]


def test_a_line_too_long_to_be_a_metrics_line_is_dropped_not_held() -> None:
    parser = MetricLines("torchtitan")
    assert parser.push(b"x" * 20000) == [] and parser.push(b"step: 1  loss: 2.0\n") == []
    assert [m.step for m in parser.push(b"step: 2  loss: 1.5\n")] == [2]


def test_a_log_tail_with_a_format_yields_samples_at_their_steps_and_the_lines(
    tmp_path: Path,
) -> None:
    log = tmp_path / "train.log"
    log.write_text("")
    tail = LogTail(log, parse="megatron")
    try:
        with log.open("a") as f:
            f.write(f"{MEGATRON}\n{MEGATRON_NAN}\n")
        reading = tail.read(1000.0)
    finally:
        tail.close()
    steps = {(s.name, s.step): s.value for s in reading.samples}
    assert steps[LOSS, 100] == 2.345678 and math.isnan(steps[LOSS, 110])
    assert all(s.labels == {} for s in reading.samples)
    assert [e.text for e in reading.events] == [MEGATRON.rstrip(), MEGATRON_NAN.rstrip()]


def test_a_pump_with_a_format_hands_over_the_metrics_its_child_prints() -> None:
    child = (
        "import sys\n"
        "for i, loss in enumerate([2.5, 2.25, float('nan')]):\n"
        "    print({'loss': loss, 'grad_norm': 1.0 + i, 'learning_rate': 1e-05, 'epoch': i / 10})\n"
        "    sys.stdout.flush()\n"
        "sys.stdout.write(str({'loss': 2.0, 'learning_rate': 1e-05, 'epoch': 0.3}))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    readings: list[tuple[Reading, float]] = []
    events: list[Event] = []
    pump = OutputPump(
        proc.stdout,
        stream="stdout",
        on_event=events.append,
        metrics=MetricLines("hf"),
        on_reading=lambda reading, ts: readings.append((reading, ts)),
        clock=lambda: 1234.5,
    ).start()
    assert proc.wait(timeout=30) == 0 and pump.join(30)
    samples = [s for reading, _ in readings for s in reading.samples]
    loss = {s.step: s.value for s in samples if s.name == LOSS}
    assert list(loss)[:2] == [1, 2] and loss[1] == 2.5 and math.isnan(loss[3]) and loss[4] == 2.0
    assert {s.labels.get("stream") for s in samples} == {None}
    assert {ts for _, ts in readings} == {1234.5} and len(events) == 4


def test_a_pump_refuses_metrics_with_nowhere_to_go() -> None:
    with pytest.raises(ValueError, match="on_reading"):
        OutputPump(io.BytesIO(), stream="stdout", on_event=print, metrics=MetricLines("hf"))


def _get(url: str, path: str, **params: Any) -> Any:
    with httpx.Client(base_url=url, timeout=10) as client:
        response = client.get(path, params=params)
        response.raise_for_status()
        return response.json()


def _wait_for(fetch: Any, timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (found := fetch()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return found


def _loss(url: str) -> dict[int, Any]:
    series = _get(url, "/api/v1/series", name=LOSS, run="r-megatron")
    if not series:
        return {}
    raw = _get(url, "/api/v1/query/raw", series=series[0]["id"])
    return dict(zip(raw["step"], raw["value"], strict=True))


def test_the_agent_parses_a_megatron_log_into_the_collector(server: Any, tmp_path: Path) -> None:
    log = tmp_path / "megatron.log"
    log.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    command = [sys.executable, "-m", "stepwatch.cli", "agent", "--dir", str(tmp_path / "spool")]
    args = ["--server", server.url, "--gpu", "none", "--node", "n7", "--run", "r-megatron"]
    args += ["--interval", "0.2", "--log", str(log), "--parse", "megatron"]
    with subprocess.Popen([*command, *args], env=env, stderr=subprocess.PIPE) as proc:
        try:
            _wait_for(lambda: _get(server.url, "/api/v1/series", name="stepwatch.heartbeat_s"))
            with log.open("a") as f:
                f.write(f"{MEGATRON}\n{MEGATRON_NAN}\n{MEGATRON_VALIDATION}\n")
            loss = _wait_for(lambda: len(_loss(server.url)) == 2 and _loss(server.url))
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert loss[100] == 2.345678 and math.isnan(float(loss[110]))
    (series,) = _get(server.url, "/api/v1/series", name=LOSS)
    assert series["labels"] == {"node": "n7", "run": "r-megatron"}
    (step_time,) = _get(server.url, "/api/v1/series", name=STEP_TIME)
    raw = _get(server.url, "/api/v1/query/raw", series=step_time["id"])
    assert dict(zip(raw["step"], raw["value"], strict=True)) == {100: 1.2345, 110: 1.2301}
    lines = [e["text"] for e in _get(server.url, "/api/v1/events", kind="log")]
    assert lines == [MEGATRON.rstrip(), MEGATRON_NAN.rstrip(), MEGATRON_VALIDATION.rstrip()]


def test_parse_without_a_log_file_is_refused(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "stepwatch.cli", "agent", "--dir", str(tmp_path / "spool")]
    done = subprocess.run(
        [*command, "--gpu", "none", "--parse", "hf"], capture_output=True, timeout=60
    )
    assert done.returncode != 0 and b"--parse reads the --log files" in done.stderr


def test_an_unknown_format_is_refused_in_one_line(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "stepwatch.cli", "agent", "--dir", str(tmp_path / "spool")]
    log = str(tmp_path / "train.log")
    done = subprocess.run(
        [*command, "--gpu", "none", "--log", log, "--parse", "wandb"],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode != 0 and b"--parse wandb: use one of auto, megatron" in done.stderr
