"""Remediation playbooks: an allow-listed command or Ansible playbook, and the exact argv it
becomes for one entity. Label values go in as whole argv elements (no shell ever parses them)
and as Ansible variables marked unsafe (Ansible never templates them)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PLAYBOOK_KINDS", "Playbook", "PlaybookError", "Prepared", "ansible_playbook_program"]

#: What an entry runs: a program with arguments, or ``ansible-playbook`` on a playbook file.
PLAYBOOK_KINDS = ("command", "ansible")
#: ``{node}``, ``{gpu}``, ``{run}``...: the label of that name. Nothing else is substituted.
PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_VARIABLE_RE = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")
#: Ansible's magic and reserved variable names that hold no ``ansible_`` prefix.
_ANSIBLE_NAMES = frozenset(
    {
        "environment", "group_names", "groups", "hostvars", "inventory_dir", "inventory_file",
        "inventory_hostname", "inventory_hostname_short", "omit", "play_hosts", "playbook_dir",
        "role_name", "role_names", "role_path", "vars",
    }
)  # fmt: skip


class PlaybookError(ValueError):
    """A request that cannot become a run: unknown entry, missing or unfit label."""


def _label_value(name: str, labels: Mapping[str, str], forbid: str = "") -> str:
    """A label fit to stand as (part of) an argument: present, not an option, no control
    characters (nor any of ``forbid``). Spaces, quotes and ``;`` are fine: no shell sees them."""
    if name not in labels:
        raise PlaybookError(f"label {name!r} is needed but the request has none")
    value = labels[name]
    if not value or value.startswith("-"):
        raise PlaybookError(f"label {name}={value!r} may not be empty or start with '-'")
    if _CONTROL_RE.search(value):
        raise PlaybookError(f"label {name}={value!r} holds control characters")
    if any(c in value for c in forbid):
        raise PlaybookError(f"label {name}={value!r} may not hold any of {forbid!r} here")
    return value


def substitute(template: str, labels: Mapping[str, str], forbid: str = "") -> str:
    """``template`` with each ``{label}`` replaced by the label's value, in one pass."""
    return PLACEHOLDER_RE.sub(lambda m: _label_value(m.group(1), labels, forbid), template)


def _variable(name: str) -> str:
    """A label name fit to be an Ansible variable: one that only says what to act on. Names
    Ansible gives meaning to (``ansible_*`` connection settings, magic variables) would change
    how it runs, so a label of such a name is refused."""
    if not _VARIABLE_RE.match(name) or name.startswith("ansible_") or name in _ANSIBLE_NAMES:
        raise PlaybookError(f"label {name!r} cannot be an Ansible variable (a name it reserves)")
    return name


def ansible_playbook_program() -> str:
    """``ansible-playbook`` beside this Python (a virtual environment), else on PATH."""
    beside = Path(sys.executable).parent / "ansible-playbook"
    if beside.exists():
        return str(beside)
    return shutil.which("ansible-playbook") or "ansible-playbook"


def _unsafe_vars(values: Mapping[str, str]) -> str:
    """A YAML vars file whose every value is ``!unsafe``: Ansible uses it verbatim, so a label
    such as ``{{ lookup('pipe', ...) }}`` stays text."""
    return "".join(f"{json.dumps(k)}: !unsafe {json.dumps(v)}\n" for k, v in sorted(values.items()))


@dataclass(frozen=True, slots=True)
class Prepared:
    """What one run executes: ``argv`` (never through a shell), and for Ansible the extra-vars
    file to write first (at ``vars_path``, named in ``argv``)."""

    argv: tuple[str, ...]
    vars_text: str = ""
    vars_path: str = ""

    def __str__(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True, slots=True)
class Playbook:
    """One allow-listed remediation.

    ``argv`` (command) or ``playbook`` with ``inventory`` and ``vars`` (ansible) may hold
    ``{label}`` placeholders. ``dry_run`` entries only ever run as a dry run (``--check``; a
    command's argv is echoed); ``destructive`` real runs wait for the approval of
    ``approvals`` admins other than the requester; ``triggers`` are the alert kinds that
    request it by themselves."""

    name: str
    kind: str
    argv: tuple[str, ...] = ()
    playbook: str = ""
    inventory: str = "{node},"
    vars: tuple[tuple[str, str], ...] = ()
    destructive: bool = True
    dry_run: bool = True
    timeout_s: float = 300.0
    triggers: tuple[str, ...] = ()
    approvals: int = 1
    line: int = 0
    description: str = field(default="", compare=False)

    def prepare(self, labels: Mapping[str, str], dry_run: bool, vars_path: str = "") -> Prepared:
        """The run for ``labels``; a PlaybookError when a label is missing or unfit."""
        if self.kind == "command":
            return Prepared(tuple(substitute(a, labels) for a in self.argv))
        inventory = substitute(self.inventory, labels, forbid=",")  # one host, no more
        extra = {_variable(k): v for k, v in labels.items()}
        extra.update({k: substitute(v, labels) for k, v in self.vars})
        argv = [ansible_playbook_program(), "-i", inventory, self.playbook, "-e", f"@{vars_path}"]
        if dry_run:
            argv += ["--check", "--diff"]
        return Prepared(tuple(argv), _unsafe_vars(extra), vars_path)

    def as_json(self) -> dict[str, object]:
        """The entry as the API shows it."""
        return {
            "name": self.name,
            "kind": self.kind,
            "argv": list(self.argv),
            "playbook": self.playbook,
            "inventory": self.inventory if self.kind == "ansible" else "",
            "vars": dict(self.vars),
            "destructive": self.destructive,
            "dry_run": self.dry_run,
            "timeout_s": self.timeout_s,
            "triggers": list(self.triggers),
            "approvals": self.approvals,
            "description": self.description,
        }
