"""The Hugging Face callback: a real Trainer on a tiny GPT-2 logging into the real collector."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
import tqdm

from stepwatch.integrations._names import hf_metrics, hf_name

from .conftest import RandomTokens, events, stored

STEPS = 6


def test_log_keys_map_onto_the_vocabulary() -> None:
    logs = {"loss": 2.5, "learning_rate": 1e-3, "grad_norm": 0.5, "eval_loss": 3, "epoch": 0.5}
    logs |= {"eval_f1 score": 0.9, "train_loss": 2.0, "note": "text", "done": True}
    assert hf_metrics(logs) == {
        "train.loss": 2.5,
        "train.lr": 1e-3,
        "train.grad_norm": 0.5,
        "eval.loss": 3.0,
        "hf.epoch": 0.5,
        "eval.f1_score": 0.9,
        "hf.train_loss": 2.0,
    }
    assert len(hf_name("x" * 300)) <= 200


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No downloads; and no tqdm monitor thread (checkpoint saving shows a progress bar)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setattr(tqdm.tqdm, "monitor_interval", 0)


def train(tmp_path: Path, callback: Any) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=32)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        run_name="tiny-gpt2",
        max_steps=STEPS,
        per_device_train_batch_size=4,
        logging_steps=2,
        eval_strategy="steps",
        eval_steps=3,
        save_steps=3,
        learning_rate=1e-3,
        lr_scheduler_type="linear",
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=GPT2LMHeadModel(config),
        args=args,
        train_dataset=RandomTokens(64),
        eval_dataset=RandomTokens(8),
        callbacks=[callback],
    )
    trainer.train()
    return trainer


def test_trainer_steps_logs_and_checkpoints_reach_the_collector(
    server: Any, tmp_path: Path, offline: None
) -> None:
    from stepwatch.integrations.huggingface import StepwatchCallback

    callback = StepwatchCallback(server=server.url, run_id="r-hf", dir=tmp_path / "spool")
    trainer = train(tmp_path, callback)
    assert callback.run is not None and callback.run.finished
    history = {h["step"]: h for h in trainer.state.log_history if "loss" in h}
    loss = stored(server.url, "train.loss", "r-hf")
    assert loss == {s: pytest.approx(h["loss"]) for s, h in history.items()} and len(loss) == 3
    assert stored(server.url, "train.lr", "r-hf") == {
        s: pytest.approx(h["learning_rate"]) for s, h in history.items()
    }
    assert sorted(stored(server.url, "train.grad_norm", "r-hf")) == [2, 4, 6]
    assert sorted(stored(server.url, "eval.loss", "r-hf")) == [3, 6]
    step_time = stored(server.url, "train.step_time_s", "r-hf")
    data_time = stored(server.url, "train.data_time_s", "r-hf")
    compute = stored(server.url, "train.compute_time_s", "r-hf")
    assert sorted(step_time) == sorted(compute) == sorted(data_time) == list(range(1, STEPS + 1))
    assert all(math.isclose(step_time[s], data_time[s] + compute[s]) for s in step_time)
    saved = events(server.url, "r-hf", "checkpoint")
    assert [e["data"]["step"] for e in saved] == [3, 6]
    assert all(e["data"]["bytes"] > 0 for e in saved)
    assert stored(server.url, "ckpt.bytes", "r-hf") == {
        e["data"]["step"]: e["data"]["bytes"] for e in saved
    }
    meta = httpx.get(f"{server.url}/api/v1/runs/r-hf", timeout=10).json()
    assert (meta["status"], meta["project"], meta["name"]) == (
        "finished",
        "huggingface",
        "tiny-gpt2",
    )
    assert meta["planned_total_steps"] == STEPS
    assert meta["config"]["args"]["max_steps"] == STEPS and meta["config"]["model"]["n_embd"] == 32
    stated = {"type": "linear", "peak_lr": 1e-3, "warmup_steps": 0, "total_steps": STEPS}
    assert meta["config"]["lr_schedule"] == {**stated, "final_lr": 0.0}


def test_a_given_run_is_used_and_left_open(tmp_path: Path, offline: None) -> None:
    import stepwatch
    from stepwatch.integrations.huggingface import StepwatchCallback

    with stepwatch.init(run_id="r-given", dir=tmp_path / "spool", flush_interval_s=3600) as run:
        callback = StepwatchCallback(run)
        train(tmp_path, callback)
        assert callback.run is run and not run.finished
