"""``stepwatch run -- CMD``: run a command as a recorded, watched training run."""

from ._launch import CommandNotFound, Launch, Outcome, launch

__all__ = ["CommandNotFound", "Launch", "Outcome", "launch"]
