"""Training control through the framework callbacks: a real Trainer (Hugging Face, Lightning)
picks up the collector's commands and applies them natively."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
import tqdm

from .conftest import RandomTokens

#: Far more steps than the commands need: a stop that works ends the training long before.
MAX_STEPS = 2000
LEAFSPEC = r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning"


#: Every command but rollback (whose answer depends on whether a checkpoint exists yet:
#: test_rollback sets that up).
COMMANDS: list[tuple[str, dict[str, float]]] = [
    ("lower_lr", {"factor": 0.5}),
    ("skip_step", {"steps": 10}),
    ("checkpoint", {}),
    ("stop", {"timeout_s": 120}),
]


def queue_commands(
    url: str, run: str, commands: list[tuple[str, dict[str, float]]] = COMMANDS
) -> list[str]:
    """Register the run (if new) and queue these commands for it."""
    with httpx.Client(base_url=url, timeout=10) as client:
        client.post("/api/v1/runs", json={"id": run})
        ids = []
        for action, args in commands:
            body = {"action": action, "args": args}
            ids.append(client.post(f"/api/v1/runs/{run}/commands", json=body).json()["id"])
        return ids


def answers(url: str, run: str) -> dict[str, tuple[str, str]]:
    listed = httpx.get(f"{url}/api/v1/runs/{run}/commands", timeout=10).json()
    return {c["action"]: (c["status"], c["detail"]) for c in listed}


def test_the_hugging_face_trainer_obeys_commands(
    server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from stepwatch.integrations.huggingface import StepwatchCallback

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(tqdm.tqdm, "monitor_interval", 0)
    queue_commands(server.url, "r-hf")
    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=32)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=MAX_STEPS, per_device_train_batch_size=4,
        learning_rate=1e-3, lr_scheduler_type="linear", save_strategy="no", report_to=[],
        use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, logging_steps=1000,
    )  # fmt: skip
    callback = StepwatchCallback(
        server=server.url, run_id="r-hf", dir=tmp_path / "spool", poll_interval_s=0.05
    )
    trainer = Trainer(
        model=GPT2LMHeadModel(config), args=args, train_dataset=RandomTokens(64),
        callbacks=[callback],
    )  # fmt: skip
    trainer.train()
    assert trainer.state.global_step < MAX_STEPS  # stopped
    assert trainer.lr_scheduler.base_lrs == [pytest.approx(5e-4)] * len(
        trainer.optimizer.param_groups
    )
    saved = [p.name for p in (tmp_path / "out").iterdir() if p.name.startswith("checkpoint-")]
    assert len(saved) == 1
    got = answers(server.url, "r-hf")
    assert {action: status for action, (status, _) in got.items()} == {
        "lower_lr": "ok", "skip_step": "ok", "checkpoint": "ok", "stop": "ok",
    }  # fmt: skip


@pytest.mark.filterwarnings(LEAFSPEC)
def test_the_lightning_trainer_obeys_commands(server: Any, tmp_path: Path) -> None:
    import lightning.pytorch as pl

    from stepwatch.integrations.lightning import StepwatchCallback

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(8, 1)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            inputs, targets = batch
            return torch.nn.functional.mse_loss(self.net(inputs), targets)

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
            return [optimizer], [{"scheduler": scheduler, "interval": "step"}]

    queue_commands(server.url, "r-pl")
    generator = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(
        torch.randn(64, 8, generator=generator), torch.randn(64, 1, generator=generator)
    )
    callback = StepwatchCallback(
        server=server.url, run_id="r-pl", dir=tmp_path / "spool", poll_interval_s=0.05
    )
    trainer = pl.Trainer(
        max_steps=MAX_STEPS, accelerator="cpu", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, callbacks=[callback],
        default_root_dir=str(tmp_path / "pl"),
    )  # fmt: skip
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=4))
    assert trainer.global_step < MAX_STEPS
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.05)
    assert len(list((tmp_path / "pl" / "stepwatch").glob("step-*.ckpt"))) == 1
    got = answers(server.url, "r-pl")
    assert {action: status for action, (status, _) in got.items()} == {
        "lower_lr": "ok", "skip_step": "ok", "checkpoint": "ok", "stop": "ok",
    }  # fmt: skip
