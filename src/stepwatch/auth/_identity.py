"""Who is asking: the identity a token (or the open loopback collector) stands for."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ._roles import GRANTS, Permission, Role

__all__ = ["ALL_PROJECTS", "ANONYMOUS", "Identity"]

#: The project set of a token that sees every project (a cluster's operators, node agents).
ALL_PROJECTS = "*"


@dataclass(frozen=True, slots=True)
class Identity:
    """A named principal with a role over a set of projects (``None``: every project)."""

    name: str
    role: Role
    projects: frozenset[str] | None
    token_id: str = ""

    def can(self, permission: Permission) -> bool:
        """True when the role grants ``permission``."""
        return permission in GRANTS[self.role]

    def can_any(self, permissions: Iterable[Permission]) -> bool:
        """True when the role grants one of ``permissions``."""
        return any(self.can(p) for p in permissions)

    def sees(self, project: str | None) -> bool:
        """True for a project of this identity; data of no project is for all-project tokens."""
        if self.projects is None:
            return True
        return project is not None and project in self.projects

    @property
    def actor(self) -> str:
        """How audit records name this identity: never a field a request could set."""
        return f"{self.name} ({self.token_id})" if self.token_id else self.name

    def as_json(self) -> dict[str, object]:
        projects = ALL_PROJECTS if self.projects is None else sorted(self.projects)
        return {"name": self.name, "role": str(self.role), "projects": projects}


#: The identity of every request to a collector running without ``--auth`` (loopback only).
ANONYMOUS = Identity("local", Role.ADMIN, None)
