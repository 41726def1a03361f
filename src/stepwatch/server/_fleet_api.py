"""GET /api/v1/fleet: the collectors reading the broker with this one, and who reads what."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import APIRouter

from ._auth import Reader
from ._jsonio import JSON

if TYPE_CHECKING:
    from ..fleet import BrokerIntake
    from ._fleet_proxy import Relays

__all__ = ["FleetSlot", "fleet_router"]


@dataclass
class FleetSlot:
    """The broker intake, set once the collector listens (None: HTTP ingest only)."""

    intake: BrokerIntake | None = None
    #: The event streams relayed from other members (ended when the collector stops).
    relays: Relays | None = None

    def owner(self, run: str) -> str | None:
        """The id of the member that reads ``run``'s partition now (None: unknown)."""
        found = self.intake.owner_of(run) if self.intake else None
        return found.id if found else None


def fleet_router(slot: FleetSlot) -> APIRouter:
    """The fleet route over ``slot``."""
    router = APIRouter()

    @router.get("/api/v1/fleet")
    def fleet(who: Reader) -> JSON:
        """This collector's fleet: each member's id, URL and the partitions it reads now."""
        intake = slot.intake
        if intake is None:
            return JSON({"broker": False, "self": None, "partitions": 0, "members": []})
        me = intake.members.me.id
        members = sorted(intake.members.alive().values(), key=lambda m: m.id)
        return JSON(
            {
                "broker": True,
                "self": me,
                "partitions": intake.layout.partitions,
                "members": [
                    {"id": m.id, "url": m.url, "partitions": list(m.partitions)} for m in members
                ],
            }
        )

    return router
