"""The Lightning callback (``lightning.pytorch``): ``Trainer(callbacks=[StepwatchCallback()])``."""

from __future__ import annotations

from lightning.pytorch import Callback

from ._lightning import LightningHooks

__all__ = ["StepwatchCallback"]


class StepwatchCallback(LightningHooks, Callback):
    __doc__ = LightningHooks.__doc__
