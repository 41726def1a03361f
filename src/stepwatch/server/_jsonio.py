"""JSON responses that spell NaN/Inf as ``wire.json_number`` does, never as bare NaN."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
from fastapi.responses import JSONResponse

from ..wire import json_number

__all__ = ["JSON", "clean", "column", "error_response"]


class JSON(JSONResponse):
    """Compact JSON that refuses bare NaN, so a missed conversion fails loudly in tests."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":"), allow_nan=False).encode()


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSON:
    """The one error shape of the API: ``{"error": "<what is wrong>"}``."""
    return JSON({"error": message}, status_code=status, headers=headers)


def column(values: np.ndarray) -> list[Any]:
    """A numpy column as a JSON list; only the non-finite entries cost Python work."""
    out: list[Any] = values.tolist()
    if values.dtype.kind == "f":
        for i in np.flatnonzero(~np.isfinite(values)).tolist():
            out[i] = json_number(out[i])
    return out


def clean(obj: Any) -> Any:
    """Free-form JSON (event data, run config) with non-finite floats spelled as strings."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else json_number(obj)
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    return obj
