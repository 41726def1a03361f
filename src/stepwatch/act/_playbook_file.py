"""The playbooks file: the allow-list of remediations, validated like rule files.

    playbooks:
      - name: restart_gpu_services
        kind: command
        argv: [systemctl, restart, "nvidia-persistenced@{gpu}"]
        destructive: false
        dry_run: false
        timeout: 2m
        triggers: [gpu_xid]
      - name: drain_node
        kind: ansible
        playbook: drain.yml          # relative to this file
        inventory: "{node},"
        vars: {reason: "stepwatch alert"}
        destructive: true
        dry_run: false
        approvals: 2                 # distinct admins, none of them the requester (default 1)

Every mistake is reported as ``file:line: field: what was expected``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..config import At, Problems, RuleError, compose, read_config
from ._playbook import PLAYBOOK_KINDS, Playbook, PlaybookError

__all__ = ["Playbooks", "load_playbooks", "parse_playbooks"]

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_KEYS = {
    "name", "kind", "argv", "playbook", "inventory", "vars", "destructive", "dry_run",
    "timeout", "triggers", "description", "approvals",
}  # fmt: skip
_COMMAND_ONLY = ("argv",)
_ANSIBLE_ONLY = ("playbook", "inventory", "vars")


@dataclass(frozen=True, slots=True)
class Playbooks:
    """The allow-list, by name; nothing outside it ever runs."""

    entries: tuple[Playbook, ...] = ()

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Playbook]:
        return iter(self.entries)

    def get(self, name: str) -> Playbook:
        """The entry called ``name``; a PlaybookError for a name not in the allow-list."""
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise PlaybookError(f"playbook {name!r} is not in the allow-list")

    def triggered_by(self, kind: str) -> list[Playbook]:
        """The entries an alert of ``kind`` requests by itself."""
        return [e for e in self.entries if kind in e.triggers]


def _flag(at: At) -> bool:
    value = at.scalar()
    if not isinstance(value, bool):
        raise at.error(f"expected true or false, got {value!r}")
    return value


def _approvals(at: At) -> int:
    value = at.number()
    if value != int(value) or value < 1:
        raise at.error(f"expected a whole number of approvers, at least 1, got {at.node.value!r}")
    return int(value)


def _triggers(at: At) -> tuple[str, ...]:
    kinds = tuple(at.str_list())
    for kind in kinds:
        if not _NAME_RE.match(kind):
            raise at.error(f"alert kind {kind!r} must be lower_snake_case")
    return kinds


def _entry(at: At, base: Path) -> Playbook:
    f = at.mapping(_KEYS, {"name", "kind"})
    name = f["name"].text()
    if not _NAME_RE.match(name):
        raise f["name"].error(f"name {name!r} must be lower_snake_case")
    kind = f["kind"].text()
    if kind not in PLAYBOOK_KINDS:
        raise f["kind"].error(f"expected one of {', '.join(PLAYBOOK_KINDS)}, got {kind!r}")
    other = _ANSIBLE_ONLY if kind == "command" else _COMMAND_ONLY
    for key in other:
        if key in f:
            raise f[key].error(f"a {kind} playbook takes no {key!r}")
    argv: tuple[str, ...] = ()
    playbook = ""
    if kind == "command":
        if "argv" not in f:
            raise at.error("a command playbook needs 'argv' (a list: program, then arguments)")
        argv = tuple(f["argv"].str_list())
        if not argv:
            raise f["argv"].error("expected at least the program")
    else:
        if "playbook" not in f:
            raise at.error("an ansible playbook needs 'playbook' (the playbook file)")
        path = Path(f["playbook"].text())
        playbook = str(path if path.is_absolute() else base / path)
    timeout_s = f["timeout"].duration() if "timeout" in f else 300.0
    if timeout_s <= 0:
        raise f["timeout"].error("expected a duration above zero")
    return Playbook(
        name=name,
        kind=kind,
        argv=argv,
        playbook=playbook,
        inventory=f["inventory"].text() if "inventory" in f else "{node},",
        vars=tuple(sorted(f["vars"].str_map().items())) if "vars" in f else (),
        destructive=_flag(f["destructive"]) if "destructive" in f else True,
        dry_run=_flag(f["dry_run"]) if "dry_run" in f else True,
        timeout_s=timeout_s,
        triggers=_triggers(f["triggers"]) if "triggers" in f else (),
        approvals=_approvals(f["approvals"]) if "approvals" in f else 1,
        line=at.line,
        description=f["description"].text() if "description" in f else "",
    )


def parse_playbooks(text: str, source: str, base: Path | None = None) -> Playbooks:
    """Validate a playbooks file's text (ansible paths relative to ``base``); the RuleError
    raised names the first mistake of every wrong entry, in line order."""
    root = compose(text, source)
    if root is None:
        raise RuleError(source, None, "", "the file is empty: expected 'playbooks:'")
    top = At(root, "", source).mapping({"playbooks"}, {"playbooks"})
    problems = Problems()
    seen: dict[str, int] = {}
    entries = []
    for entry_at in top["playbooks"].items():
        entry = problems.check(_entry, entry_at, base or Path.cwd(), default=None)
        if entry is None:
            continue  # its mistake is noted; the other entries are still checked
        if entry.name in seen:
            again = f"playbook {entry.name!r} is already defined (line {seen[entry.name]})"
            problems.add(entry_at.error(again))
        seen[entry.name] = entry.line
        entries.append(entry)
    problems.raise_any()
    return Playbooks(tuple(entries))


def load_playbooks(path: str | Path) -> Playbooks:
    """Read and validate a playbooks file; ansible playbook paths are relative to it."""
    path = Path(path)
    text = read_config(path)
    return parse_playbooks(text, str(path), path.resolve().parent)
