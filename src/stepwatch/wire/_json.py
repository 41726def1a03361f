"""JSON batches for simple clients (curl, scripts), and the JSON spelling of non-finite numbers.

JSON has no NaN or infinity, so values may also be the strings "NaN", "Inf",
"+Inf" or "-Inf" (Prometheus' spelling); responses use the same strings.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..model import MAX_ABS_TS_S as _TS
from ..model import MAX_INT64, NO_STEP, SampleBatch, SeriesKey, is_timestamp
from ._binary import event_from_dict, is_count
from ._errors import WireError

CONTENT_TYPE = "application/json"

_SPECIAL = {
    "nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "-inf": -math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-infinity": -math.inf,
}


def parse_value(raw: Any, where: str) -> float:
    """A sample value from JSON: a number or one of the non-finite spellings."""
    if isinstance(raw, bool):
        raise WireError(f"{where}: value must be a number, got a boolean")
    if isinstance(raw, (int, float)):
        try:
            return float(raw)
        except OverflowError:
            raise WireError(f"{where}: value is an integer too large for a float") from None
    if isinstance(raw, str) and raw.lower() in _SPECIAL:
        return _SPECIAL[raw.lower()]
    raise WireError(f"{where}: value must be a number or 'NaN'/'Inf'/'-Inf', got {raw!r:.40}")


def json_number(x: float) -> float | str:
    """The inverse of parse_value, for responses: finite floats stay numbers."""
    if math.isfinite(x):
        return x
    if math.isnan(x):
        return "NaN"
    return "+Inf" if x > 0 else "-Inf"


def _header(doc: Any) -> tuple[str, int, list[Any], list[Any]]:
    """The batch's source, seq, samples and events, each of the right type."""
    if not isinstance(doc, dict):
        raise WireError("body must be a JSON object with 'source', 'seq' and 'samples'")
    if doc.get("version", 1) != 1:
        raise WireError(
            f"unsupported batch version {doc.get('version')!r}: this server reads version 1"
        )
    source, seq = doc.get("source"), doc.get("seq")
    if not isinstance(source, str) or not source:
        raise WireError("field 'source' must be a non-empty string")
    if not is_count(seq):
        raise WireError(f"field 'seq' must be a non-negative integer up to {MAX_INT64}")
    samples, events = doc.get("samples", []), doc.get("events", [])
    if not isinstance(samples, list) or not isinstance(events, list):
        raise WireError("fields 'samples' and 'events' must be lists")
    return source, seq, samples, events


def _sample(s: Any, where: str, default_ts: float) -> tuple[SeriesKey, float, float, int]:
    """One sample object as (series key, value, ts, step)."""
    if not isinstance(s, dict):
        raise WireError(f"{where} must be an object with 'name' and 'value'")
    labels = s.get("labels") or {}
    if not isinstance(labels, dict):
        raise WireError(f"{where}: 'labels' must be an object of label names and values")
    try:
        key = SeriesKey.of(s.get("name"), labels)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise WireError(f"{where}: {exc}") from None
    if "value" not in s:
        raise WireError(f"{where}: missing 'value'")
    value = parse_value(s["value"], where)
    t = s.get("ts", default_ts)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not is_timestamp(t):
        raise WireError(f"{where}: 'ts' must be a finite number of seconds within ±{_TS:g}")
    st = s.get("step")
    if st is not None and not is_count(st):
        raise WireError(f"{where}: 'step' must be a non-negative integer up to {MAX_INT64}")
    return key, value, float(t), NO_STEP if st is None else st


def decode_json(body: bytes, now: Callable[[], float] = time.time) -> SampleBatch:
    """Decode a JSON batch ``{"source", "seq", "samples": [...], "events": [...]}``."""
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise WireError(f"body is not valid JSON: {exc}") from None
    source, seq, samples, events = _header(doc)
    index: dict[SeriesKey, int] = {}
    n = len(samples)
    series = np.empty(n, np.uint32)
    ts = np.empty(n, np.float64)
    step = np.empty(n, np.int64)
    value = np.empty(n, np.float64)
    default_ts = now()
    for i, s in enumerate(samples):
        key, value[i], ts[i], step[i] = _sample(s, f"samples[{i}]", default_ts)
        series[i] = index.setdefault(key, len(index))
    batch = SampleBatch(
        source, seq, list(index), series, ts, step, value, [event_from_dict(e) for e in events]
    )
    batch.check()
    return batch
