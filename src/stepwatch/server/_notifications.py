"""The collector's notifications: a notifier built from ``--notify``'s config, fed every
alert transition that is neither silenced nor inhibited, auditing through the event log."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..act import Notifier, NotifyConfig, load_notify_config
from ..detect import LiveDetector
from ..model import Event

__all__ = ["Notifications", "load_config", "served_at"]


class Notifications:
    """The notifier of one collector, or nothing when no config is given."""

    def __init__(
        self,
        config: NotifyConfig | None,
        live: LiveDetector,
        record: Callable[[Sequence[Event]], None],
        clock: Callable[[], float],
    ) -> None:
        self.notifier = None if config is None else Notifier(config, record, clock=clock)
        if self.notifier is not None:
            live.subscribe(self.notifier.submit)  # muted alerts stay quiet

    def start(self) -> None:
        if self.notifier is not None:
            self.notifier.start()

    def stop(self) -> None:
        """After the detector has stopped: what it said last still goes out."""
        if self.notifier is not None:
            self.notifier.stop()


def load_config(path: str | Path | None) -> NotifyConfig | None:
    """The ``--notify`` file, validated (a RuleError at its first mistake); None without one."""
    return None if path is None else load_notify_config(path)


def served_at(config: NotifyConfig | None, url: str) -> NotifyConfig | None:
    """The config with the collector's own URL for alert links, unless the file names one."""
    if config is None or config.external_url:
        return config
    return config.but(external_url=url)
