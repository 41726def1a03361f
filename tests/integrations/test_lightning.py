"""The Lightning callback: a real Trainer on a tiny module, logging into the real collector."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from .conftest import RecordingRun, events, stored

STEPS = 6

# Lightning 2.6 still asks torch's pytree the deprecated way; not something tested here.
LEAFSPEC = r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning"


def make_module(base: type[Any], schedule: Any = None) -> Any:
    """A tiny regression LightningModule on top of ``base`` that remembers its losses; its
    rate halves every step, or follows ``schedule`` (a factor of the step) when given."""

    class Tiny(base):  # type: ignore[misc,valid-type]
        def __init__(self, lr: float = 0.1) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)
            )
            self.losses: list[float] = []

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            inputs, targets = batch
            loss = torch.nn.functional.mse_loss(self.net(inputs), targets)
            self.losses.append(float(loss.detach()))
            return {"loss": loss}

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
            scheduler = (
                torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
                if schedule is None
                else torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
            )
            return [optimizer], [{"scheduler": scheduler, "interval": "step"}]

    return Tiny()


def loader() -> torch.utils.data.DataLoader[Any]:
    generator = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(
        torch.randn(64, 8, generator=generator), torch.randn(64, 1, generator=generator)
    )
    return torch.utils.data.DataLoader(data, batch_size=4)


def fit(trainer_cls: type[Any], module: Any, callback: Any, **kwargs: Any) -> Any:
    torch.manual_seed(0)
    settings: dict[str, Any] = {
        "max_steps": STEPS,
        "accelerator": "cpu",
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "callbacks": [callback],
    }
    trainer = trainer_cls(**(settings | kwargs))
    trainer.fit(module, loader())
    return trainer


@pytest.mark.filterwarnings(LEAFSPEC)
def test_fit_reaches_the_collector(server: Any, tmp_path: Path) -> None:
    import lightning.pytorch as pl

    from stepwatch.integrations.lightning import StepwatchCallback

    module = make_module(pl.LightningModule)
    callback = StepwatchCallback(server=server.url, run_id="r-pl", dir=tmp_path / "spool")
    trainer = fit(pl.Trainer, module, callback)
    trainer.save_checkpoint(tmp_path / "last.ckpt")  # after the run ended: no event, no error
    assert callback.run is not None and callback.run.finished
    loss = stored(server.url, "train.loss", "r-pl")
    assert loss == {s: pytest.approx(v) for s, v in enumerate(module.losses)}
    assert stored(server.url, "train.lr", "r-pl") == {
        s: pytest.approx(0.1 * 0.5**s) for s in range(STEPS)
    }
    assert sorted(stored(server.url, "train.grad_norm", "r-pl")) == list(range(STEPS))
    step_time = stored(server.url, "train.step_time_s", "r-pl")
    data_time = stored(server.url, "train.data_time_s", "r-pl")
    compute = stored(server.url, "train.compute_time_s", "r-pl")
    assert sorted(step_time) == sorted(compute) == list(range(STEPS))
    assert sorted(data_time) == list(range(1, STEPS))
    assert all(math.isclose(step_time[s], data_time[s] + compute[s]) for s in data_time)
    meta = httpx.get(f"{server.url}/api/v1/runs/r-pl", timeout=10).json()
    assert (meta["status"], meta["project"], meta["name"]) == ("finished", "lightning", "Tiny")
    assert meta["planned_total_steps"] == STEPS and meta["config"]["hparams"] == {"lr": 0.1}
    assert "lr_schedule" not in meta["config"]  # halving every step: no shape of the format


@pytest.mark.filterwarnings(LEAFSPEC)
def test_a_schedule_of_a_shape_the_format_holds_is_stated(server: Any, tmp_path: Path) -> None:
    import lightning.pytorch as pl

    from stepwatch.integrations.lightning import StepwatchCallback

    def warm_cosine(s: int) -> float:
        return s / 2 if s < 2 else 0.5 * (1 + math.cos(math.pi * (s - 2) / (STEPS - 2)))

    module = make_module(pl.LightningModule, warm_cosine)
    callback = StepwatchCallback(server=server.url, run_id="r-pl-cos", dir=tmp_path / "spool")
    fit(pl.Trainer, module, callback)
    meta = httpx.get(f"{server.url}/api/v1/runs/r-pl-cos", timeout=10).json()
    stated = meta["config"]["lr_schedule"]
    assert {k: v for k, v in stated.items() if k != "final_lr"} == {
        "type": "cosine", "peak_lr": 0.1, "warmup_steps": 2, "total_steps": STEPS,
    }  # fmt: skip
    assert stated["final_lr"] == pytest.approx(0.0, abs=1e-12)
    assert stored(server.url, "train.lr", "r-pl-cos") == {
        s: pytest.approx(0.1 * warm_cosine(s)) for s in range(STEPS)
    }


@pytest.mark.filterwarnings(LEAFSPEC)
def test_clipping_reuses_lightnings_norm(monkeypatch: pytest.MonkeyPatch) -> None:
    import lightning.pytorch as pl

    from stepwatch.integrations.lightning import StepwatchCallback

    own_passes: list[float] = []
    original = torch.nn.utils.get_total_norm

    def counting(*args: Any, **kwargs: Any) -> Any:
        own_passes.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(torch.nn.utils, "get_total_norm", counting)  # watch()'s own pass
    clipped: list[float] = []

    class Clipping(StepwatchCallback):
        def on_before_zero_grad(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
            grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
            if grads:  # after clipping: the grads are at most the clip value
                clipped.append(float(torch.cat([g.flatten() for g in grads]).norm()))

    run = RecordingRun()
    fit(pl.Trainer, make_module(pl.LightningModule), Clipping(run), gradient_clip_val=1e-3)
    norms = run.series("train.grad_norm")
    assert sorted(norms) == list(range(STEPS)) and own_passes == []
    assert all(n > 1e-3 for n in norms.values())  # the norm before clipping
    assert all(c <= 1e-3 * 1.01 for c in clipped)


@pytest.mark.filterwarnings(LEAFSPEC)
def test_a_failing_fit_fails_the_run(tmp_path: Path) -> None:
    import lightning.pytorch as pl

    from stepwatch.integrations.lightning import StepwatchCallback

    module = make_module(pl.LightningModule)
    steps = 0

    def failing(batch: Any, batch_idx: int) -> Any:
        nonlocal steps
        steps += 1
        if steps == 3:
            raise RuntimeError("diverged")
        return type(module).training_step(module, batch, batch_idx)

    module.training_step = failing
    original = torch.nn.utils.clip_grad_norm_
    callback = StepwatchCallback(run_id="r-fail", dir=tmp_path, flush_interval_s=3600)
    with pytest.raises(RuntimeError, match="diverged"):
        fit(pl.Trainer, module, callback)
    assert callback.run is not None and callback.run.finished
    assert (tmp_path / "r-fail" / "run.json").read_text().count('"failed"') == 1
    assert torch.nn.utils.clip_grad_norm_ is original  # the clip listener left with the run


@pytest.mark.filterwarnings(LEAFSPEC)
def test_checkpoints_are_events(server: Any, tmp_path: Path) -> None:
    import lightning.pytorch as pl

    from stepwatch.integrations.lightning import StepwatchCallback

    checkpoints = pl.callbacks.ModelCheckpoint(
        dirpath=tmp_path / "ckpt", every_n_train_steps=2, save_top_k=-1
    )
    callback = StepwatchCallback(server=server.url, run_id="r-ckpt", dir=tmp_path / "spool")
    fit(
        pl.Trainer,
        make_module(pl.LightningModule),
        callback,
        enable_checkpointing=True,
        callbacks=[callback, checkpoints],
    )
    assert [e["data"]["step"] for e in events(server.url, "r-ckpt", "checkpoint")] == [2, 4, 6]


@pytest.mark.filterwarnings(LEAFSPEC)
def test_the_standalone_pytorch_lightning_package() -> None:
    import pytorch_lightning as ptl

    from stepwatch.integrations.pytorch_lightning import StepwatchCallback

    run = RecordingRun()
    module = make_module(ptl.LightningModule)
    fit(ptl.Trainer, module, StepwatchCallback(run))
    assert run.series("train.loss") == {s: pytest.approx(v) for s, v in enumerate(module.losses)}
