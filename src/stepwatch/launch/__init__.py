"""``stepwatch run -- CMD``: run a command as a recorded, watched training run."""

from ._launch import Launch, Outcome, launch

__all__ = ["Launch", "Outcome", "launch"]
