"""Alerts as JSON lines in the scenario format, so replay output can be scored and read back."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

__all__ = ["AlertRecord", "AlertsFormatError", "read_alerts", "write_alerts"]

#: Labels that scorers compare as integers.
_INT_LABELS = ("rank", "gpu")
_FIELDS = ("kind", "ts", "labels")


class AlertsFormatError(ValueError):
    """An alert that cannot be written, or a line of an alerts file that cannot be read."""


@dataclass(frozen=True, slots=True)
class AlertRecord:
    """One alert as a line of an alerts file: kind, the data time it began to fire, its entity.

    ``labels`` holds ``run`` and any of ``node``, ``rank``, ``gpu``; rank and gpu
    are ints when numeric. ``extra`` carries severity, summary, value and so on.
    """

    kind: str
    ts: float
    labels: dict[str, str | int]
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, kind: str, ts: float, labels: Mapping[str, object], **extra: Any) -> AlertRecord:
        """A checked record: absent labels (None, "") dropped, numeric rank/gpu as ints."""
        if not isinstance(kind, str) or not kind:
            raise AlertsFormatError(f"alert kind must be a non-empty string, got {kind!r}")
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
            raise AlertsFormatError(f"alert {kind}: ts must be a finite number, got {ts!r}")
        norm = {k: _label(k, v) for k, v in labels.items() if v is not None and v != ""}
        if not isinstance(norm.get("run"), str):
            raise AlertsFormatError(f"alert {kind}: labels need a run, got {dict(labels)!r}")
        return cls(kind, float(ts), norm, dict(extra))

    def as_json(self) -> dict[str, Any]:
        """The record as one JSON object; non-finite numbers become "nan", "inf", "-inf"."""
        return {"kind": self.kind, "ts": self.ts, "labels": dict(self.labels)} | _finite(self.extra)


def _label(key: str, value: object) -> str | int:
    """Rank and gpu as ints when they are numbers, every other label as a string."""
    if key in _INT_LABELS:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value)
    raise AlertsFormatError(f"label {key!r} must be a str or int, got {value!r}")


def _finite(value: Any) -> Any:
    """JSON-safe copy: floats that JSON cannot hold become their names as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def write_alerts(target: str | Path | TextIO, alerts: Iterable[AlertRecord]) -> int:
    """Write alerts one JSON object a line (a path is overwritten); returns how many."""
    if isinstance(target, (str, Path)):
        with Path(target).open("w", encoding="utf-8") as f:
            return write_alerts(f, alerts)
    n = 0
    for alert in alerts:
        target.write(json.dumps(alert.as_json(), allow_nan=False) + "\n")
        n += 1
    target.flush()
    return n


def read_alerts(path: str | Path) -> Iterator[AlertRecord]:
    """The alerts of a JSON-lines file, blank lines skipped; errors name the file and line."""
    path = Path(path)
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                yield _parse(f"{path}:{n}", line)


def _parse(where: str, line: str) -> AlertRecord:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise AlertsFormatError(f"{where}: not JSON: {e}") from e
    if not isinstance(obj, dict) or not all(k in obj for k in _FIELDS):
        raise AlertsFormatError(f"{where}: an alert needs kind, ts and labels")
    if not isinstance(obj["labels"], dict):
        raise AlertsFormatError(f"{where}: labels must be an object")
    extra = {k: v for k, v in obj.items() if k not in _FIELDS}
    try:
        return AlertRecord.of(obj["kind"], obj["ts"], obj["labels"], **extra)
    except AlertsFormatError as e:
        raise AlertsFormatError(f"{where}: {e}") from e
