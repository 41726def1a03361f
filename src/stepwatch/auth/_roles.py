"""Roles and the permissions they grant: the whole access model in one table."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["GRANTS", "Permission", "Role"]


class Permission(StrEnum):
    """What a route needs; a role grants a set of these."""

    WRITE = "write"  # send samples and producer events, create and finish runs, answer commands
    READ = "read"  # every query, list and stream
    OPERATE = "operate"  # ack, silence, commands to runs, requesting playbooks
    ADMIN = "admin"  # tokens, approving destructive playbooks, configuration


class Role(StrEnum):
    """The four roles a token can have."""

    INGEST = "ingest"
    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


#: Training nodes hold ingest tokens, so ingest grants nothing that reads or steers.
GRANTS: dict[Role, frozenset[Permission]] = {
    Role.INGEST: frozenset({Permission.WRITE}),
    Role.VIEWER: frozenset({Permission.READ}),
    Role.OPERATOR: frozenset({Permission.READ, Permission.OPERATE}),
    Role.ADMIN: frozenset(Permission),
}
