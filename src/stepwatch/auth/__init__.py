"""Identities, roles and projects: who may do what, and the tokens that say who is asking."""

from ._bootstrap import admin_token_path, ensure_admin_token
from ._identity import ALL_PROJECTS, ANONYMOUS, Identity
from ._roles import GRANTS, Permission, Role
from ._tokens import TOKEN_PREFIX, TokenBook, TokenError, TokenRefused, token_digest

__all__ = [
    "ALL_PROJECTS",
    "ANONYMOUS",
    "GRANTS",
    "TOKEN_PREFIX",
    "Identity",
    "Permission",
    "Role",
    "TokenBook",
    "TokenError",
    "TokenRefused",
    "admin_token_path",
    "ensure_admin_token",
    "token_digest",
]
