"""Which collector owns which partition: rendezvous hashing over the live members.

Each partition goes to the member with the highest hash of (member, partition), so a member
joining or leaving moves only the partitions it gains or had, and every member computes the
same answer from the same member list without talking it over.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = ["owner", "owned_by"]


def _weight(member: str, partition: int) -> bytes:
    return hashlib.blake2b(f"{member}\0{partition}".encode(), digest_size=8).digest()


def owner(partition: int, members: Iterable[str]) -> str | None:
    """The member that owns ``partition`` (None without members)."""
    return max(members, key=lambda m: (_weight(m, partition), m), default=None)


def owned_by(member: str, partitions: int, members: Iterable[str]) -> set[int]:
    """The partitions ``member`` owns among ``members``."""
    live = sorted(set(members) | {member})
    return {p for p in range(partitions) if owner(p, live) == member}
