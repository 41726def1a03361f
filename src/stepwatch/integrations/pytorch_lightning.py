"""The Lightning callback for the standalone ``pytorch_lightning`` package."""

from __future__ import annotations

from pytorch_lightning import Callback

from ._lightning import LightningHooks

__all__ = ["StepwatchCallback"]


class StepwatchCallback(LightningHooks, Callback):
    __doc__ = LightningHooks.__doc__
