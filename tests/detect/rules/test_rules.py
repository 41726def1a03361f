"""The rule language: a valid file reads into rules; every mistake names file, line and field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from stepwatch.detect import Comparison, LogMatch, RuleError, load_rules, parse_rules
from stepwatch.detect.rules._templates import check_template, render


def robust_z(*, threshold: float = 6.0, direction: str = "both", halflife: float = 100) -> None:
    """A stand-in detector constructor: only its keyword parameters matter to validation."""


DETECTORS = {"robust_z": robust_z, "nonfinite": lambda: None}

GOOD = """\
groups:
  - name: training
    rules:
      - alert: loss_spike
        signal: {metric: loss, match: {rank: "0"}, by: [run]}
        detector: {type: robust_z, threshold: 8, direction: up}
        for: 30s
        keep_firing_for: 2m
        severity: warning
        labels: {team: ml}
        annotations:
          summary: "loss {{ $value }} on {{ $labels.run }}, baseline {{ $baseline | humanize }}"
        playbook: Lower the learning rate.
      - alert: nonfinite_loss
        kind: nonfinite
        signal: {metric: train.loss}
        detector: nonfinite
        for: 2 samples
        severity: critical
  - name: hardware
    rules:
      - alert: gpu_hot
        kind: gpu_thermal
        signal: {metric: gpu.temp_c, by: [node, gpu]}
        threshold: ">= 80"
        for: 5m
      - alert: log_oom
        signal: {log: {regex: "CUDA out of memory", any: [OOM, OutOfMemoryError]}, by: [node]}
        severity: critical
"""


def test_a_valid_file_reads_into_rules(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(GOOD)
    rules = load_rules(path, DETECTORS).rules
    assert [r.key for r in rules] == [
        ("training", "loss_spike"),
        ("training", "nonfinite_loss"),
        ("hardware", "gpu_hot"),
        ("hardware", "log_oom"),
    ]
    spike, nonfinite, hot, oom = rules
    assert spike.signal.metrics == ("train.loss",) and spike.signal.match == (("rank", ("0",)),)
    assert (spike.detector, spike.params) == ("robust_z", (("direction", "up"), ("threshold", 8.0)))
    assert (spike.for_s, spike.keep_firing_for_s, spike.line) == (30.0, 120.0, 4)
    assert dict(spike.labels) == {"team": "ml"} and spike.playbook == "Lower the learning rate."
    assert (nonfinite.kind, nonfinite.detector, nonfinite.params) == ("nonfinite", "nonfinite", ())
    assert (nonfinite.for_s, nonfinite.for_samples, spike.for_samples) == (0.0, 2, 0)
    assert hot.threshold == Comparison(">=", 80.0) and hot.for_s == 300.0
    assert hot.severity == "warning" and hot.kind == "gpu_thermal"
    assert oom.signal.log == LogMatch("CUDA out of memory", (), ("OOM", "OutOfMemoryError"))


def test_a_log_signal_may_name_the_lines_it_leaves_out() -> None:
    text = GOOD.replace("any: [OOM, OutOfMemoryError]}", "exclude: 'retrying'}")
    oom = parse_rules(text, "a.yaml", DETECTORS).rules[-1]
    assert oom.signal.log == LogMatch("CUDA out of memory", exclude="retrying")


@pytest.mark.parametrize(
    ("given", "expected"),
    [("10m or 500 samples", (600.0, 500)), ("500 samples or 10m", (600.0, 500)),
     ("90s  or  1 sample", (90.0, 1)), ("2m", (120.0, 0)), ("7 samples", (0.0, 7))],
)  # fmt: skip
def test_for_reads_a_duration_a_count_or_both(given: str, expected: tuple[float, int]) -> None:
    text = _rule_file(BASE + f"  detector: robust_z\n  for: {given}\n")
    (rule,) = parse_rules(text, "r.yaml", DETECTORS).rules
    assert (rule.for_s, rule.for_samples) == expected


def test_a_matcher_takes_a_value_or_a_list_of_them_and_empty_means_without_the_label() -> None:
    text = _rule_file("- alert: a\n  signal: {metric: m, match: {rank: [0, ''], gpu: 3}}\n"
                      "  threshold: '> 1'\n")  # fmt: skip
    (rule,) = parse_rules(text, "r.yaml", DETECTORS).rules
    assert rule.signal.match == (("gpu", ("3",)), ("rank", ("0", "")))


def test_equal_rules_compare_equal_so_a_reload_can_keep_their_state() -> None:
    first = parse_rules(GOOD, "a.yaml", DETECTORS).rules
    changed = parse_rules(GOOD.replace("threshold: 8", "threshold: 9"), "a.yaml", DETECTORS).rules
    assert first == parse_rules(GOOD, "a.yaml", DETECTORS).rules
    assert [a == b for a, b in zip(first, changed, strict=True)] == [False, True, True, True]


def _rule_file(rule: str) -> str:
    return "groups:\n  - name: g\n    rules:\n" + textwrap.indent(textwrap.dedent(rule), " " * 6)


BASE = "- alert: a\n  signal: {metric: train.loss}\n"

MISTAKES = [
    ("groups: [", 1, "", "not valid YAML"),
    ("", None, "", "empty"),
    ("rules: []", 1, "", "unknown key 'rules'"),
    (_rule_file(BASE + "  detector: robust_z\n  for: soon\n"), 7, "groups[0].rules[0].for",
     "expected a duration like 30s"),
    (_rule_file(BASE + "  threshold: '> 1'\n  detector: robust_z\n"), 4, "groups[0].rules[0]",
     "exactly one of detector or threshold"),
    (_rule_file(BASE + "  detector: {type: robust_z, window: 5}\n"), 6,
     "groups[0].rules[0].detector.window", "takes no parameter 'window'"),
    (_rule_file(BASE + "  detector: isolation_forest\n"), 6, "groups[0].rules[0].detector",
     "unknown detector 'isolation_forest'; expected one of nonfinite, robust_z"),
    (_rule_file(BASE + "  threshold: 'above 80'\n"), 6, "groups[0].rules[0].threshold",
     "expected a comparison like '> 80'"),
    (_rule_file(BASE + "  threshold: '& 0xZZ'\n"), 6, "groups[0].rules[0].threshold",
     "'& 0x60' (any of these bits)"),
    (_rule_file(BASE + "  threshold: '> 1'\n  severity: urgent\n"), 7,
     "groups[0].rules[0].severity", "expected one of info, warning, critical"),
    (_rule_file(BASE + "  threshold: '> 1'\n  annotations: {summary: '{{ $valeu }}'}\n"), 7,
     "groups[0].rules[0].annotations", "summary: unknown template field '{{ $valeu }}'"),
    (_rule_file(BASE + "  detector: robust_z\n  for: 0 samples\n"), 7, "groups[0].rules[0].for",
     "at least 1 sample"),
    (_rule_file(BASE + "  detector: robust_z\n  for: 10m or 10s\n"), 7, "groups[0].rules[0].for",
     "expected one duration above 0 and one count, got '10m or 10s'"),
    (_rule_file(BASE + "  detector: robust_z\n  for: 0s or 5 samples\n"), 7,
     "groups[0].rules[0].for", "one duration above 0 and one count"),
    (_rule_file(BASE + "  detector: robust_z\n  for: 10m or 0 samples\n"), 7,
     "groups[0].rules[0].for", "at least 1 sample"),
    (_rule_file(BASE + "  detector: robust_z\n  for: 10m or\n"), 7, "groups[0].rules[0].for",
     "or both as '10m or 500 samples', got '10m or'"),
    (_rule_file(BASE + "  detector: robust_z\n  for: 1m or 2 samples or 3m\n"), 7,
     "groups[0].rules[0].for", "expected a duration like 30s"),
    (_rule_file("- alert: a\n  signal: {metric: m, match: {rank: [0, {x: 1}]}}\n"
                "  threshold: '> 1'\n"), 5, "groups[0].rules[0].signal.match.rank[1]",
     "expected a label value"),
    (_rule_file("- alert: a\n  signal: {metric: m, match: {rank: []}}\n  threshold: '> 1'\n"),
     5, "groups[0].rules[0].signal.match.rank", "at least one value"),
    (_rule_file("- alert: a\n  signal: {metric: m, match: {rank: 0.5}}\n  threshold: '> 1'\n"),
     5, "groups[0].rules[0].signal.match.rank", "a string or an integer"),
    (_rule_file(BASE + "  threshold: '> 1'\n  tresh: 1\n"), 7, "groups[0].rules[0]",
     "unknown key 'tresh'"),
    (_rule_file("- alert: a\n  threshold: '> 1'\n"), 4, "groups[0].rules[0]",
     "missing required key 'signal'"),
    (_rule_file("- alert: a\n  signal: {metric: 'bad name!'}\n  threshold: '> 1'\n"), 5,
     "groups[0].rules[0].signal.metric", "invalid metric name"),
    (_rule_file("- alert: a\n  signal: {log: {regex: '(unclosed'}}\n"), 5,
     "groups[0].rules[0].signal.log.regex", "bad regular expression '(unclosed'"),
    (_rule_file("- alert: a\n  signal: {log: {regex: '(a)\\1'}}\n"), 5,
     "groups[0].rules[0].signal.log.regex", "no backreferences"),
    (_rule_file("- alert: a\n  signal: {log: {regex: x, exclude: '(a)\\1'}}\n"), 5,
     "groups[0].rules[0].signal.log.exclude", "no backreferences"),
    (_rule_file("- alert: a\n  signal: {log: {regex: x}}\n  threshold: '> 1'\n"), 4,
     "groups[0].rules[0]", "no detector or threshold"),
    (_rule_file(BASE + "  threshold: '> 1'\n" + BASE + "  threshold: '> 2'\n"), 7,
     "groups[0].rules[1]", "already defined in group 'g' (line 4)"),
    (_rule_file(BASE + "  threshold: '> 1'\n  kind: Loss-Spike\n"), 7,
     "groups[0].rules[0].kind", "lower_snake_case"),
    (_rule_file(BASE + "  threshold: '> 1'\n  labels: {'bad label': x}\n"), 7,
     "groups[0].rules[0].labels", "invalid label name"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "line", "field", "message"), MISTAKES)
def test_every_mistake_names_file_line_and_field(
    text: str, line: int | None, field: str, message: str
) -> None:
    with pytest.raises(RuleError) as caught:
        parse_rules(text, "r.yaml", DETECTORS)
    error = caught.value
    assert (error.source, error.line, error.field) == ("r.yaml", line, field)
    assert message in str(error)
    assert str(error).startswith("r.yaml" if line is None else f"r.yaml:{line}: ")


def test_an_unreadable_file_is_a_rule_error_in_words(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(RuleError) as raised:
        load_rules(missing, DETECTORS)
    assert str(raised.value) == f"{missing}: cannot read the file: no such file or directory"
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("groups: []  # caf\xe9".encode("latin-1"))
    with pytest.raises(RuleError, match=r"latin.yaml: cannot read the file: not UTF-8 text"):
        load_rules(latin, DETECTORS)


def test_templates_render_labels_values_and_humanized_numbers() -> None:
    text = "{{ $labels.node }} GPU {{$labels.gpu}} at {{ $value }} °C ({{ $baseline | humanize }})"
    check_template(text)
    out = render(text, {"node": "node3", "gpu": "6"}, {"value": 87.25, "baseline": 2.5e9})
    assert out == "node3 GPU 6 at 87.25 °C (2.5G)"
    assert render("{{ $labels.rank }}|{{ $since }}", {}, {}) == "|"
    with pytest.raises(ValueError, match="unknown template field"):
        check_template("{{ .Value }}")


def test_a_detector_across_members_needs_by_and_a_metric_may_be_a_list() -> None:
    from stepwatch.detect import DETECTORS as REAL

    text = _rule_file("- alert: s\n  signal: {metric: train.compute_time_s}\n  detector: peers\n")
    with pytest.raises(
        RuleError, match=r"r.yaml:5: groups\[0\].rules\[0\].signal: detector 'peers'"
    ):
        parse_rules(text, "r.yaml", REAL)
    text = _rule_file(
        "- alert: node_down\n  signal: {metric: [stepwatch.heartbeat_s, loss], by: [node]}\n"
        "  detector: {type: absence, timeout_s: 30}\n"
    )
    (rule,) = parse_rules(text, "r.yaml", REAL).rules
    assert rule.signal.metrics == ("stepwatch.heartbeat_s", "train.loss")
    assert rule.params == (("timeout_s", 30.0),)


def test_divide_by_names_a_metric_and_not_with_logs() -> None:
    good = _rule_file(
        "- alert: a\n  signal: {metric: ckpt.bytes, divide_by: ckpt.write_s}\n"
        "  threshold: '< 2e8'\n"
    )
    (rule,) = parse_rules(good, "r.yaml", DETECTORS).rules
    assert rule.signal.divide_by == "ckpt.write_s"
    bad = _rule_file("- alert: a\n  signal: {log: {regex: x}, divide_by: ckpt.write_s}\n")
    with pytest.raises(RuleError, match="log signal has no values to divide"):
        parse_rules(bad, "r.yaml", DETECTORS)


def test_where_judges_only_the_samples_whose_own_value_meets_it() -> None:
    good = _rule_file(
        "- alert: a\n  signal: {metric: ckpt.bytes, divide_by: ckpt.write_s, where: '>= 1e9'}\n"
        "  threshold: '< 2e8'\n"
    )
    (rule,) = parse_rules(good, "r.yaml", DETECTORS).rules
    assert rule.signal.where == Comparison(">=", 1e9)
    bad = _rule_file("- alert: a\n  signal: {metric: ckpt.bytes, where: big}\n  threshold: '< 1'\n")
    with pytest.raises(RuleError, match=r"r.yaml:5: .*signal.where: expected a comparison"):
        parse_rules(bad, "r.yaml", DETECTORS)
    logs = _rule_file("- alert: a\n  signal: {log: {regex: x}, where: '> 1'}\n")
    with pytest.raises(RuleError, match="log signal has no values to compare"):
        parse_rules(logs, "r.yaml", DETECTORS)
