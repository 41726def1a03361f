"""The collector's notifications: a notifier built from ``--notify``'s config, fed every
alert transition that is neither silenced nor inhibited, auditing through the event log.
Routes see an alert's ``project`` label: its run's project, never a label the data carried.
An incident's message names the playbooks of its root cause and the actions filed for them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..act import History, Notifier, NotifyConfig, PlaybooksOf, load_notify_config, no_playbooks
from ..detect import LiveAlert, LiveDetector
from ..model import Event

__all__ = ["Notifications", "load_config", "served_at"]

ProjectOf = Callable[[str | None], str | None]


def stamped(alert: LiveAlert, project_of: ProjectOf) -> LiveAlert:
    """The alert with its run's project as its ``project`` label (none for no run)."""
    labels = {k: v for k, v in alert.labels.items() if k != "project"}
    project = project_of(labels.get("run"))
    if project:
        labels["project"] = project
    return alert if labels == alert.labels else alert.but(labels=labels)


class Notifications:
    """The notifier of one collector, or nothing when no config is given."""

    def __init__(
        self,
        config: NotifyConfig | None,
        live: LiveDetector,
        record: Callable[[Sequence[Event]], None],
        clock: Callable[[], float],
        project_of: ProjectOf = lambda run: None,
        history: History | None = None,
        playbooks: PlaybooksOf = no_playbooks,
    ) -> None:
        self.notifier = None
        if config is not None:
            self.notifier = Notifier(
                config, record, clock=clock, history=history, playbooks=playbooks
            )
        if self.notifier is not None:
            submit = self.notifier.submit
            live.subscribe(lambda alert: submit(stamped(alert, project_of)))  # muted: quiet

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
