"""The ``policies:`` section of rule files: what it means, and a precise error for each mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepwatch.act import Policies, Policy, PolicyStep
from stepwatch.detect import (
    DETECTORS,
    RuleError,
    RuleFiles,
    builtin_rules,
    parse_rules,
)

GOOD = """\
groups:
  - name: mine
    rules:
      - alert: loud
        signal: {metric: train.loss}
        threshold: "> 10"
policies:
  observe_only: true
  max_actions_per_run: 2
  rules:
    - name: divergence
      kinds: [loss_divergence, loud]
      cooldown: 10m
      steps:
        - {action: notify}
        - {after: 30s, action: lower_lr, args: {factor: 0.25}}
        - {after: 5m, action: checkpoint}
        - {after: 5m, action: stop}
    - name: nan
      kinds: nonfinite
      steps:
        - {action: rollback}
"""


def test_a_policy_section_reads_into_policies() -> None:
    rules = parse_rules(GOOD, "p.yaml", DETECTORS)
    assert len(rules) == 1
    assert rules.policies == Policies(
        rules=(
            Policy(
                "divergence",
                ("loss_divergence", "loud"),
                (
                    PolicyStep(0.0, "notify"),
                    PolicyStep(30.0, "lower_lr", (("factor", 0.25),)),
                    PolicyStep(300.0, "checkpoint"),
                    PolicyStep(300.0, "stop", (("timeout_s", 300.0),)),
                ),
                cooldown_s=600.0,
                line=11,
            ),
            Policy("nan", ("nonfinite",), (PolicyStep(0.0, "rollback"),), line=19),
        ),
        observe_only=True,
        max_actions_per_run=2,
    )
    assert [p.name for p in rules.policies.matching("nonfinite", "nonfinite_loss")] == ["nan"]
    assert [p.name for p in rules.policies.matching("other", "loud")] == ["divergence"]


def test_a_file_may_hold_policies_only_and_the_last_section_wins(tmp_path: Path) -> None:
    only = parse_rules("policies: {observe_only: false}\n", "p.yaml", DETECTORS)
    assert len(only) == 0 and only.policies == Policies()
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(GOOD)
    second.write_text("policies:\n  max_actions_per_run: 9\n")
    merged = RuleFiles([first, second], base=builtin_rules()).load()
    assert merged.policies == Policies(max_actions_per_run=9)
    assert RuleFiles([second, first]).load().policies.observe_only  # type: ignore[union-attr]
    assert builtin_rules().policies is None


def policy_file(steps: str = "        - {action: notify}") -> str:
    return f"policies:\n  rules:\n    - name: p\n      kinds: [k]\n      steps:\n{steps}\n"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{}\n", "p.yaml: expected 'groups:' or 'policies:'"),
        ("policies: [1]\n", "p.yaml:1: policies: expected a mapping"),
        ("policies: {limit: 3}\n", "p.yaml:1: policies: unknown key 'limit'"),
        (
            "policies: {observe_only: yes please}\n",
            "p.yaml:1: policies.observe_only: expected true or false",
        ),
        (
            "policies: {max_actions_per_run: -1}\n",
            "p.yaml:1: policies.max_actions_per_run: expected a whole number >= 0",
        ),
        (
            "policies: {max_actions_per_run: 1.5}\n",
            "p.yaml:1: policies.max_actions_per_run: expected a whole number >= 0",
        ),
        ("policies: {rules: {name: p}}\n", "p.yaml:1: policies.rules: expected a list"),
        (
            "policies:\n  rules:\n    - {kinds: [k], steps: []}\n",
            "p.yaml:3: policies.rules[0]: missing required key 'name'",
        ),
        (
            "policies:\n  rules:\n    - {name: Big, kinds: [k], steps: []}\n",
            "p.yaml:3: policies.rules[0].name: name 'Big' must be lower_snake_case",
        ),
        (
            "policies:\n  rules:\n    - {name: p, kinds: [], steps: [{action: notify}]}\n",
            "p.yaml:3: policies.rules[0].kinds: give at least one alert kind",
        ),
        (
            "policies:\n  rules:\n    - {name: p, kinds: [k], steps: []}\n",
            "p.yaml:3: policies.rules[0].steps: give at least one step",
        ),
        (
            "policies:\n  rules:\n    - name: p\n      kinds: k\n      cooldown: soon\n"
            "      steps: [{action: notify}]\n",
            "p.yaml:5: policies.rules[0].cooldown: expected a duration",
        ),
        (
            policy_file("        - {action: reboot}"),
            "p.yaml:6: policies.rules[0].steps[0].action: unknown action 'reboot'; expected one of",
        ),
        (
            policy_file("        - {act: notify}"),
            "p.yaml:6: policies.rules[0].steps[0]: unknown key 'act'",
        ),
        (
            policy_file("        - {action: notify, args: {x: 1}}"),
            "p.yaml:6: policies.rules[0].steps[0].args: notify takes no arguments",
        ),
        (
            policy_file("        - {action: lower_lr, args: {factor: 2}}"),
            "p.yaml:6: policies.rules[0].steps[0].args: lower_lr: factor must be between 0 and 1",
        ),
        (
            policy_file("        - {action: lower_lr, args: [0.5]}"),
            "p.yaml:6: policies.rules[0].steps[0].args: expected a mapping",
        ),
        (
            policy_file("        - {action: stop, args: {timeout: 3}}"),
            "p.yaml:6: policies.rules[0].steps[0].args: stop takes timeout_s, not 'timeout'",
        ),
        (
            policy_file("        [{after: 5m, action: notify}, {after: 1m, action: stop}]"),
            "p.yaml:6: policies.rules[0].steps[1].after: steps escalate in order: 60s comes before",
        ),
        (
            policy_file("        - {after: later, action: notify}"),
            "p.yaml:6: policies.rules[0].steps[0].after: expected a duration",
        ),
        (
            policy_file() + "    - name: p\n      kinds: [j]\n      steps: [{action: notify}]\n",
            "p.yaml:7: policies.rules[1]: policy 'p' is already defined (line 3)",
        ),
    ],
)  # fmt: skip
def test_each_mistake_names_its_file_line_and_field(text: str, error: str) -> None:
    with pytest.raises(RuleError) as caught:
        parse_rules(text, "p.yaml", DETECTORS)
    assert str(caught.value).startswith(error), str(caught.value)
