"""The rule language: rule files read with every mistake located, the built-in pack, rule
files overlaid on it, and the templates of alert annotations. It never runs a rule."""

from ._builtin import builtin_rules
from ._rule import (
    SEVERITIES,
    Comparison,
    LogMatch,
    Rule,
    RuleSet,
    Signal,
    across_members,
)
from ._rule_files import RuleFiles
from ._rules import load_rules, parse_rules
from ._templates import check_template, render

__all__ = [
    "Comparison",
    "LogMatch",
    "Rule",
    "RuleFiles",
    "RuleSet",
    "SEVERITIES",
    "Signal",
    "across_members",
    "builtin_rules",
    "check_template",
    "load_rules",
    "parse_rules",
    "render",
]
