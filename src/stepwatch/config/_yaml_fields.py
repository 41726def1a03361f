"""Reading a YAML document as typed fields, each error naming the file, line and field path.

PyYAML's composed nodes keep their positions; reading through them (rather
than through plain dicts) is what lets ``stepwatch rules check`` point at the line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

__all__ = ["At", "Problems", "RuleError", "compose", "parse_duration", "read_config"]

T = TypeVar("T")

_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class RuleError(ValueError):
    """A rule file is wrong: ``file:line: field: what was expected``, a line per mistake.

    ``problems`` holds each mistake (this error alone, or those gathered by ``of``) in line
    order; ``source``, ``line`` and ``field`` are the first one's.
    """

    def __init__(self, source: str, line: int | None, field: str, message: str) -> None:
        self.source, self.line, self.field, self.message = source, line, field, message
        self.problems: tuple[RuleError, ...] = (self,)
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")

    @classmethod
    def of(cls, problems: Iterable[RuleError]) -> RuleError:
        """One error for several mistakes, so a check reports all of them, in line order."""
        each = {str(p): p for e in problems for p in e.problems}  # each mistake once
        ordered = sorted(each.values(), key=lambda p: -1 if p.line is None else p.line)
        first = ordered[0]
        error = cls(first.source, first.line, first.field, first.message)
        error.problems = tuple(ordered)
        error.args = ("\n".join(str(p) for p in ordered),)
        return error


@dataclass(slots=True)
class Problems:
    """The mistakes found so far in one file: checking goes on past each one."""

    found: list[RuleError] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.found)

    def add(self, error: RuleError) -> None:
        self.found.extend(error.problems)

    def check(self, read: Callable[..., T], *args: Any, default: T) -> T:
        """``read(*args)``, or ``default`` when it raised RuleError (the mistake kept)."""
        try:
            return read(*args)
        except RuleError as exc:
            self.add(exc)
            return default

    def raise_any(self) -> None:
        """Raise every mistake found as one RuleError."""
        if self.found:
            raise RuleError.of(self.found)


_SAMPLES_RE = re.compile(r"^(\d+)\s*samples?$")


def parse_duration(text: str) -> float:
    """Seconds of a Prometheus-style duration (``90s``, ``5m``, ``1h``; ``0`` is allowed)."""
    if text == "0":
        return 0.0
    match = _DURATION_RE.match(text)
    if match is None:
        raise ValueError(f"expected a duration like 30s, 5m or 1h, got {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _hold_part(text: str) -> float | int | None:
    """One side of a ``for``: seconds (a float), a count of samples (an int), None if neither."""
    if match := _SAMPLES_RE.match(text):
        return int(match.group(1))
    try:
        return parse_duration(text)
    except ValueError:
        return None


def read_config(path: Path) -> str:
    """A configuration file's text; one that cannot be read is a RuleError naming it, in words."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        why = (exc.strerror or type(exc).__name__).lower()
    except UnicodeDecodeError as exc:
        why = f"not UTF-8 text (byte {exc.start})"
    raise RuleError(str(path), None, "", f"cannot read the file: {why}")


def compose(text: str, source: str) -> yaml.Node | None:
    """The document's node tree; a YAML syntax error becomes a RuleError with its line."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = None if mark is None else mark.line + 1
        raise RuleError(source, line, "", f"not valid YAML: {exc.problem}") from None


@dataclass(frozen=True, slots=True)
class At:
    """One node of the document with its field path (``groups[0].rules[2].for``)."""

    node: yaml.Node
    path: str
    source: str

    @property
    def line(self) -> int:
        return int(self.node.start_mark.line) + 1

    def error(self, message: str) -> RuleError:
        return RuleError(self.source, self.line, self.path, message)

    def _child(self, node: yaml.Node, part: str) -> At:
        joined = (
            f"{self.path}.{part}" if self.path and not part.startswith("[") else self.path + part
        )
        return At(node, joined, self.source)

    def _value(self) -> Any:
        return yaml.SafeLoader("").construct_object(self.node, deep=True)

    @property
    def is_mapping(self) -> bool:
        return isinstance(self.node, yaml.MappingNode)

    @property
    def is_list(self) -> bool:
        return isinstance(self.node, yaml.SequenceNode)

    def mapping(
        self,
        allowed: Collection[str] | None,
        required: Collection[str] = (),
        problems: Problems | None = None,
    ) -> dict[str, At]:
        """The keys of a mapping; an unknown (when ``allowed`` is given) or missing key is an
        error naming it. With ``problems``, an unknown or repeated key is noted there and left
        out, so the other keys can still be checked."""
        if not self.is_mapping:
            expected = f" with keys {', '.join(sorted(allowed))}" if allowed else ""
            raise self.error(f"expected a mapping{expected}")
        fields: dict[str, At] = {}
        for key_node, value_node in self.node.value:
            key = str(key_node.value)
            if allowed is not None and key not in allowed:
                at = At(key_node, self.path, self.source)
                wrong = at.error(
                    f"unknown key {key!r}; expected one of {', '.join(sorted(allowed))}"
                )
            elif key in fields:
                wrong = self._child(key_node, key).error("given twice")
            else:
                fields[key] = self._child(value_node, key)
                continue
            if problems is None:
                raise wrong
            problems.add(wrong)
        missing = sorted(set(required) - fields.keys())
        if missing:
            raise self.error(f"missing required key {missing[0]!r}")
        return fields

    def items(self) -> Iterator[At]:
        """The entries of a list."""
        if not isinstance(self.node, yaml.SequenceNode):
            raise self.error("expected a list")
        for i, node in enumerate(self.node.value):
            yield self._child(node, f"[{i}]")

    def text(self) -> str:
        """A non-empty string scalar."""
        value = self._value() if isinstance(self.node, yaml.ScalarNode) else None
        if not isinstance(value, str) or not value:
            raise self.error("expected a non-empty string")
        return value

    def number(self) -> float:
        """A finite number."""
        value = self._value() if isinstance(self.node, yaml.ScalarNode) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise self.error(f"expected a number, got {self.node.value!r}")
        return float(value)

    def duration(self) -> float:
        """A duration in seconds (``30s``, ``5m``...)."""
        if not isinstance(self.node, yaml.ScalarNode):
            raise self.error("expected a duration like 30s, 5m or 1h")
        try:
            return parse_duration(str(self.node.value))
        except ValueError as exc:
            raise self.error(str(exc)) from None

    def hold(self) -> tuple[float, int]:
        """How long a condition must hold: a duration, ``N samples`` (consecutive samples, for
        signals whose pace is the training's step rather than the clock), or both joined by
        ``or`` (``10m or 500 samples``: whichever comes first, so a fast run is not held for
        thousands of steps nor a slow one for hours)."""
        text = str(self.node.value).strip() if isinstance(self.node, yaml.ScalarNode) else ""
        parts = [_hold_part(part.strip()) for part in text.split(" or ")]
        if any(part is None for part in parts) or len(parts) > 2:
            raise self.error(
                f"expected a duration like 30s, 5m or 1h, a count like '3 samples', or both "
                f"as '10m or 500 samples', got {text!r}"
            )
        seconds = [float(p) for p in parts if isinstance(p, float)]
        counts = [p for p in parts if isinstance(p, int)]
        if any(count < 1 for count in counts):
            raise self.error(f"expected at least 1 sample, got {text!r}")
        if len(parts) == 2 and (len(counts) != 1 or seconds[0] <= 0):
            raise self.error(f"expected one duration above 0 and one count, got {text!r}")
        return (seconds[0] if seconds else 0.0), (counts[0] if counts else 0)

    def scalar(self) -> str | float | bool:
        """A string, number or boolean (a detector parameter)."""
        value = self._value() if isinstance(self.node, yaml.ScalarNode) else None
        if not isinstance(value, (str, int, float, bool)):
            raise self.error("expected a string, number or boolean")
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value

    def str_map(self) -> dict[str, str]:
        """A mapping of names to strings (labels, annotations)."""
        if not isinstance(self.node, yaml.MappingNode):
            raise self.error("expected a mapping of names to strings")
        out: dict[str, str] = {}
        for key_node, value_node in self.node.value:
            at = self._child(value_node, str(key_node.value))
            value = at._value() if isinstance(value_node, yaml.ScalarNode) else None
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise at.error("expected a string")
            out[str(key_node.value)] = str(value)
        return out

    def str_list(self) -> list[str]:
        """A list of non-empty strings."""
        return [item.text() for item in self.items()]
