"""The JSON text the store keeps an event's labels and data in, and the text one field takes
within it: searches test for that text before parsing JSON, so both are written here, alike."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["event_json", "json_member"]

_SEPARATORS = (", ", ": ")


def event_json(fields: dict[str, Any]) -> str:
    """An event's labels or data as the store writes them; raises for what JSON cannot hold."""
    return json.dumps(fields, sort_keys=True, separators=_SEPARATORS)


def json_member(key: str, value: str) -> str:
    """The text ``key`` and its ``value`` take within ``event_json`` of fields that hold them."""
    return f"{json.dumps(key)}{_SEPARATORS[1]}{json.dumps(value)}"
