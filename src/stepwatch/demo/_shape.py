"""The shape of the simulated training: cluster size, schedule and model, fixed per demo."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

GIB = 1024**3

_COUNTS = (
    "nodes",
    "gpus_per_node",
    "planned_total_steps",
    "warmup_steps",
    "eval_every",
    "ckpt_every",
    "steps_per_epoch",
    "global_batch",
    "seq_len",
)


@dataclass(frozen=True, slots=True)
class TrainingShape:
    """What is being trained and on what; every simulated number is drawn around these.

    Args:
        nodes: hosts in the job.
        gpus_per_node: GPUs (one rank each) per host; rank r runs on node r // gpus_per_node.
        seed: makes every simulated value reproducible.
        step_s: nominal seconds of one optimizer step (pauses are multiples of it).
        planned_total_steps: the length the run is registered with (LR schedule end).
        warmup_steps: linear LR warm-up, during which the loss is noisier.
        eval_every: an evaluation pause follows every this many steps.
        ckpt_every: a checkpoint is written every this many steps.
        steps_per_epoch: the loss bumps a little at each epoch boundary.
        global_batch: sequences per optimizer step, over all ranks.
        seq_len: tokens per sequence.
        lr_max: peak learning rate after warm-up.
        model_params: parameter count, recorded in the run's config.
    """

    nodes: int = 4
    gpus_per_node: int = 8
    seed: int = 0
    step_s: float = 0.5
    planned_total_steps: int = 20_000
    warmup_steps: int = 100
    eval_every: int = 200
    ckpt_every: int = 500
    steps_per_epoch: int = 1_500
    global_batch: int = 64
    seq_len: int = 4096
    lr_max: float = 3e-4
    model_params: float = 4.2e9

    def __post_init__(self) -> None:
        for name in _COUNTS:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.step_s > 0:
            raise ValueError(f"step_s must be > 0, got {self.step_s}")

    @property
    def ranks(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    def node_name(self, node: int) -> str:
        """Host names as a scheduler would list them."""
        return f"node{node}"

    def config(self) -> dict[str, Any]:
        """The run's config as a training script would register it."""
        return {
            **asdict(self),
            "world_size": self.ranks,
            "tokens_per_step": self.tokens_per_step,
            "optimizer": "adamw",
            "precision": "bf16",
            "lr_schedule": {  # linear warm-up, cosine decay to 10 % (stated, for forecasts)
                "type": "cosine",
                "peak_lr": self.lr_max,
                "total_steps": self.planned_total_steps,
                "warmup_steps": self.warmup_steps,
                "final_lr": self.lr_max / 10,
            },
        }
