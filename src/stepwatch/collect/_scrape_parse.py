"""A strict reader of the Prometheus text exposition format (version 0.0.4).

Our own rather than ``prometheus_client.parser``: that parser renames samples
of a family typed ``counter`` to end in ``_total`` (DCGM's
``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`` becomes ``..._TOTAL_total``), accepts lines
with stray trailing fields, and reports errors without a line number. Here a
sample keeps the name the exporter wrote, and a bad line is an error that says
which line and why, so a scrape of something that is not an exporter is
reported rather than half-read. ``# HELP``/``# TYPE`` lines are not needed by
the mapping and are skipped.
"""

from __future__ import annotations

import re

__all__ = ["ExpositionError", "Metrics", "Point", "parse_exposition"]

#: One sample: its labels and its value.
Point = tuple[dict[str, str], float]
#: The samples of one exposition by sample name, in the order they came.
Metrics = dict[str, list[Point]]

_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+([^ \t]+)(?:[ \t]+(-?[0-9]+))?")
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(?:,|$)')
_ESCAPE = re.compile(r"\\(.)")
_UNESCAPED = {"n": "\n", "\\": "\\", '"': '"'}


class ExpositionError(ValueError):
    """The text is not a valid exposition; ``line`` is the 1-based number of the bad line."""

    def __init__(self, line: int, reason: str, text: str) -> None:
        super().__init__(f"line {line}: {reason}: {text[:120]!r}")
        self.line = line
        self.reason = reason


def parse_exposition(text: str) -> Metrics:
    """Every sample of ``text`` by name; raises ExpositionError at the first bad line."""
    metrics: Metrics = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _SAMPLE.fullmatch(stripped)
        if match is None:
            raise ExpositionError(number, "not a sample line", line)
        name, labels, value, _timestamp = match.groups()
        try:
            point = (_labels(labels) if labels else {}, _value(value))
        except ValueError as exc:
            raise ExpositionError(number, str(exc), line) from None
        metrics.setdefault(name, []).append(point)
    return metrics


def _labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None:
            raise ValueError(f"bad label at {text[pos : pos + 40]!r}")
        key, value = match.groups()
        if key in labels:
            raise ValueError(f"label {key!r} given twice")
        labels[key] = _ESCAPE.sub(_unescape, value) if "\\" in value else value
        pos = match.end()
    return labels


def _unescape(match: re.Match[str]) -> str:
    char = match.group(1)
    return _UNESCAPED.get(char, "\\" + char)


def _value(text: str) -> float:
    if "_" in text:  # Python's float() takes digit separators; the format does not
        raise ValueError(f"not a number: {text!r}")
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"not a number: {text!r}") from None
