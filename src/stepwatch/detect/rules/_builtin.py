"""The built-in rule pack shipped with stepwatch: what the collector runs without a rule file, and
the base that rule files and replay extend."""

from __future__ import annotations

from importlib import resources

from ..detectors import DETECTORS
from ._rules import RuleSet, parse_rules

__all__ = ["BUILTIN_RULES", "builtin_rules"]

BUILTIN_RULES = "builtin.yaml"


def builtin_rules() -> RuleSet:
    """The built-in rule pack shipped with stepwatch."""
    text = resources.files(__package__).joinpath(BUILTIN_RULES).read_text(encoding="utf-8")
    return parse_rules(text, f"stepwatch/detect/rules/{BUILTIN_RULES}", DETECTORS)
