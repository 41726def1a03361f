"""``rollback`` through the framework callbacks: a real Trainer (Hugging Face, Lightning) whose
weights turn NaN goes back to the newest checkpoint it wrote with finite weights, and trains on."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
import tqdm
from transformers import TrainerCallback

from stepwatch.integrations._rollback import NO_CHECKPOINT, newest_good

from .test_control_callbacks import LEAFSPEC, MAX_STEPS, RandomTokens, answers, queue_commands

ROLLBACK_THEN_STOP = [("rollback", {}), ("stop", {"timeout_s": 120.0})]


def finite(tensors: Any) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors)


def poison(module: torch.nn.Module) -> None:
    with torch.no_grad():
        for param in module.parameters():
            param.fill_(math.nan)


def test_the_newest_checkpoint_with_finite_weights_is_chosen(tmp_path: Path) -> None:
    weights = {"old": 1.0, "good": 2.0, "bad": math.nan}
    for name, value in weights.items():
        torch.save({"w": torch.full((3,), value), "steps": torch.tensor(7)}, tmp_path / name)

    def read(path: Path) -> dict[str, torch.Tensor]:
        loaded: dict[str, torch.Tensor] = torch.load(path, weights_only=True)
        return loaded

    found = newest_good([tmp_path / n for n in ("bad", "good", "old")], read, lambda w: w)
    assert not isinstance(found, str)
    assert (found.path.name, found.skipped) == ("good", 1)
    assert torch.equal(found.loaded["w"], torch.full((3,), 2.0))
    refused = newest_good([tmp_path / "bad"], read, lambda w: w)
    assert isinstance(refused, str) and "non-finite" in refused
    assert newest_good([], read, lambda w: w) == NO_CHECKPOINT


class HfSabotage(TrainerCallback):
    """Saves at steps 3 and 6 (by ``should_save`` unless the save strategy does), turns the
    weights NaN at step 5 (so that checkpoint-6 is bad) and then asks for a rollback; keeps
    what the weights came back as, and stops 3 steps on."""

    def __init__(self, url: str, run: str, flag: bool, lower_first: bool = False) -> None:
        self.url, self.run, self.flag, self.lower_first = url, run, flag, lower_first
        self.restored_at: int | None = None
        self.weights: dict[str, torch.Tensor] = {}
        self.adam_step = self.scheduler_epoch = -1
        self.base_lrs: list[float] = []

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step, model = state.global_step, kwargs["model"]
        if step in (3, 6) and self.flag:
            control.should_save = True
        if step == 5:
            poison(model)
        if step > 6 and self.restored_at is None and finite(model.parameters()):
            self.restored_at = step
            self.weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
            self.adam_step = int(kwargs["optimizer"].state_dict()["state"][0]["step"])
            self.scheduler_epoch = kwargs["lr_scheduler"].last_epoch
            self.base_lrs = list(kwargs["lr_scheduler"].base_lrs)
        if self.restored_at is not None and step >= self.restored_at + 3:
            control.should_training_stop = True

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == 6:
            lower = [("lower_lr", {"factor": 0.5})] if self.lower_first else []
            queue_commands(self.url, self.run, [*lower, ("rollback", {})])


def hf_train(
    server: Any, tmp_path: Path, run: str, *extra: TrainerCallback, save_steps: int = 0
) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from stepwatch.integrations.huggingface import StepwatchCallback

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=32)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=MAX_STEPS, per_device_train_batch_size=4,
        learning_rate=1e-3, lr_scheduler_type="linear", report_to=[],
        save_strategy="steps" if save_steps else "no", save_steps=save_steps or 500,
        use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, logging_steps=1000,
    )  # fmt: skip
    callback = StepwatchCallback(
        server=server.url, run_id=run, dir=tmp_path / "spool", poll_interval_s=0.05
    )
    trainer = Trainer(
        model=GPT2LMHeadModel(config), args=args, train_dataset=RandomTokens(64),
        callbacks=[callback, *extra],
    )  # fmt: skip
    trainer.train()
    return trainer


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(tqdm.tqdm, "monitor_interval", 0)


@pytest.mark.usefixtures("offline")
@pytest.mark.parametrize("save_steps", [0, 3], ids=["should_save", "save_strategy"])
def test_the_hugging_face_trainer_rolls_back_to_its_last_good_checkpoint(
    server: Any, tmp_path: Path, save_steps: int
) -> None:
    import safetensors.torch

    queue_commands(server.url, "r-hf-rb", [])
    sabotage = HfSabotage(server.url, "r-hf-rb", flag=not save_steps)
    trainer = hf_train(server, tmp_path, "r-hf-rb", sabotage, save_steps=save_steps)

    status, detail = answers(server.url, "r-hf-rb")["rollback"]
    assert status == "ok"
    assert "checkpoint-3 (step 3)" in detail and "skipped" in detail
    saved = safetensors.torch.load_file(tmp_path / "out" / "checkpoint-3" / "model.safetensors")
    assert sabotage.restored_at is not None
    assert all(torch.equal(sabotage.weights[k], v) for k, v in saved.items())
    assert (sabotage.adam_step, sabotage.scheduler_epoch) == (3, 3)
    # training went on from the restored weights
    assert trainer.state.global_step == sabotage.restored_at + 3
    final = trainer.model.state_dict()
    assert finite(final.values())
    assert any(not torch.equal(final[k], v) for k, v in saved.items())


@pytest.mark.usefixtures("offline")
def test_a_hugging_face_rollback_keeps_the_rate_lowered_after_its_checkpoint(
    server: Any, tmp_path: Path
) -> None:
    queue_commands(server.url, "r-hf-lr", [])
    sabotage = HfSabotage(server.url, "r-hf-lr", flag=True, lower_first=True)
    hf_train(server, tmp_path, "r-hf-lr", sabotage)
    told = answers(server.url, "r-hf-lr")
    assert told["lower_lr"][0] == "ok"
    status, detail = told["rollback"]
    assert status == "ok" and "checkpoint-3 (step 3)" in detail and "kept lowered" in detail
    assert sabotage.scheduler_epoch == 3  # the scheduler's state is the checkpoint's ...
    assert sabotage.base_lrs == [pytest.approx(5e-4)] * 2  # ... at the lowered rates


@pytest.mark.usefixtures("offline")
def test_the_hugging_face_trainer_cannot_roll_back_before_a_checkpoint(
    server: Any, tmp_path: Path
) -> None:
    queue_commands(server.url, "r-hf-none", ROLLBACK_THEN_STOP)
    trainer = hf_train(server, tmp_path, "r-hf-none")
    assert trainer.state.global_step < MAX_STEPS
    assert answers(server.url, "r-hf-none")["rollback"] == ("failed", NO_CHECKPOINT)


def lightning_module() -> Any:
    import lightning.pytorch as pl

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(8, 1)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            inputs, targets = batch
            return torch.nn.functional.mse_loss(self.net(inputs), targets)

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
            return [optimizer], [{"scheduler": scheduler, "interval": "step"}]

    return Tiny()


def lightning_fit(
    server: Any, tmp_path: Path, run: str, *extra: Any, checkpointing: bool = False
) -> Any:
    import lightning.pytorch as pl

    from stepwatch.integrations.lightning import StepwatchCallback

    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(
        torch.randn(64, 8, generator=generator), torch.randn(64, 1, generator=generator)
    )
    callback = StepwatchCallback(
        server=server.url, run_id=run, dir=tmp_path / "spool", poll_interval_s=0.05
    )
    trainer = pl.Trainer(
        max_steps=MAX_STEPS, accelerator="cpu", logger=False, enable_checkpointing=checkpointing,
        enable_progress_bar=False, enable_model_summary=False, callbacks=[callback, *extra],
        default_root_dir=str(tmp_path / "pl"),
    )  # fmt: skip
    trainer.fit(lightning_module(), torch.utils.data.DataLoader(data, batch_size=4))
    return trainer


class LightningRestore:
    """What a Lightning fit looked like at the first step its weights were finite again."""

    def __init__(self) -> None:
        self.at: int | None = None
        self.weights: dict[str, torch.Tensor] = {}
        self.momentum = torch.empty(0)
        self.scheduler_epoch = -1

    def watch(self, trainer: Any, module: Any) -> None:
        """After the rollback was asked for: keep the state once it is back; stop 3 steps on."""
        if self.at is None and finite(module.parameters()):
            self.at = trainer.global_step
            self.weights = {k: v.detach().clone() for k, v in module.state_dict().items()}
            optimizer = trainer.optimizers[0]
            self.momentum = optimizer.state[module.net.weight]["momentum_buffer"].clone()
            self.scheduler_epoch = trainer.lr_scheduler_configs[0].scheduler.last_epoch
        if self.at is not None and trainer.global_step >= self.at + 3:
            trainer.should_stop = True

    def assert_is(self, checkpoint: Path, trainer: Any) -> None:
        """The state restored is the checkpoint's, and training went on from it."""
        saved = torch.load(checkpoint, weights_only=False)
        assert self.at is not None
        assert all(torch.equal(self.weights[k], v) for k, v in saved["state_dict"].items())
        momentum = saved["optimizer_states"][0]["state"][0]["momentum_buffer"]
        assert torch.equal(self.momentum, momentum)
        assert self.scheduler_epoch == saved["lr_schedulers"][0]["last_epoch"]
        assert trainer.global_step == self.at + 3
        final = trainer.lightning_module.state_dict()
        assert finite(final.values())
        assert any(not torch.equal(final[k], v) for k, v in saved["state_dict"].items())


@pytest.mark.filterwarnings(LEAFSPEC)
def test_the_lightning_trainer_rolls_back_to_its_last_good_checkpoint(
    server: Any, tmp_path: Path
) -> None:
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint

    class Sabotage(pl.Callback):
        """NaN weights after step 4 (ModelCheckpoint saved step 3 and saves step 6 bad), a
        rollback asked at step 7."""

        def __init__(self) -> None:
            self.asked = False
            self.restore = LightningRestore()

        def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
            step = trainer.global_step
            if step == 4 and not self.asked:
                poison(module)
            if step == 7 and not self.asked:
                self.asked = True
                queue_commands(server.url, "r-pl-rb", [("rollback", {})])
            if self.asked:
                self.restore.watch(trainer, module)

    queue_commands(server.url, "r-pl-rb", [])
    sabotage = Sabotage()
    every3 = ModelCheckpoint(dirpath=tmp_path / "ckpts", every_n_train_steps=3, save_top_k=-1)
    trainer = lightning_fit(server, tmp_path, "r-pl-rb", sabotage, every3, checkpointing=True)

    status, detail = answers(server.url, "r-pl-rb")["rollback"]
    assert status == "ok"
    good = tmp_path / "ckpts" / "epoch=0-step=3.ckpt"
    assert f"{good} (step 3)" in detail and "skipped" in detail
    sabotage.restore.assert_is(good, trainer)


@pytest.mark.filterwarnings(LEAFSPEC)
def test_the_lightning_trainer_rolls_back_to_the_checkpoint_command_s_file(
    server: Any, tmp_path: Path
) -> None:
    import lightning.pytorch as pl

    class Sabotage(pl.Callback):
        """Asks for a checkpoint at step 2; once it is written, NaN weights and a rollback."""

        def __init__(self) -> None:
            self.written: Path | None = None
            self.restore = LightningRestore()

        def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
            if trainer.global_step == 2 and self.written is None:
                queue_commands(server.url, "r-pl-own", [("checkpoint", {})])
            files = list((tmp_path / "pl" / "stepwatch").glob("*.ckpt"))
            if self.written is None and files:
                (self.written,) = files
                poison(module)
                queue_commands(server.url, "r-pl-own", [("rollback", {})])
            elif self.written is not None:
                self.restore.watch(trainer, module)

    queue_commands(server.url, "r-pl-own", [])
    sabotage = Sabotage()
    trainer = lightning_fit(server, tmp_path, "r-pl-own", sabotage)
    status, detail = answers(server.url, "r-pl-own")["rollback"]
    assert sabotage.written is not None
    assert status == "ok" and str(sabotage.written) in detail
    sabotage.restore.assert_is(sabotage.written, trainer)


@pytest.mark.filterwarnings(LEAFSPEC)
@pytest.mark.filterwarnings("ignore:Checkpoint directory .* exists and is not empty:UserWarning")
def test_the_lightning_trainer_cannot_roll_back_before_a_checkpoint(
    server: Any, tmp_path: Path
) -> None:
    """A file already in the ModelCheckpoint's folder was not written by this fit."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    module = lightning_module()
    (tmp_path / "ckpts").mkdir()
    old = {"state_dict": module.state_dict(), "global_step": 1, "optimizer_states": []}
    torch.save(old, tmp_path / "ckpts" / "older.ckpt")
    queue_commands(server.url, "r-pl-none", ROLLBACK_THEN_STOP)
    rarely = ModelCheckpoint(dirpath=tmp_path / "ckpts", every_n_train_steps=1000)
    trainer = lightning_fit(server, tmp_path, "r-pl-none", rarely, checkpointing=True)
    assert trainer.global_step < MAX_STEPS
    assert answers(server.url, "r-pl-none")["rollback"] == ("failed", NO_CHECKPOINT)
