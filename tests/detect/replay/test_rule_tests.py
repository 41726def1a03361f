"""`stepwatch rules test`: promtool-style unit tests of rules, passing, failing and malformed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from stepwatch.cli import main
from stepwatch.detect import DETECTORS, RuleError, builtin_rules, run_rule_tests

RULES = """\
groups:
  - name: g
    rules:
      - alert: gpu_hot
        kind: gpu_thermal
        signal: {metric: gpu.temp_c, by: [node, gpu]}
        threshold: ">= 80"
        for: 5m
      - alert: log_oom
        signal: {log: {regex: "CUDA out of memory"}, by: [node]}
"""

TESTS = """\
rule_files: [rules.yaml]
tests:
  - name: hot gpu
    input_series:
      - series: 'gpu.temp_c{run="r", node="n1", gpu="0"}'
        values: "60x4 85x10"
      - series: 'gpu.temp_c{run="r", node="n1", gpu="1"}'
        values: "60 _ 61+1x5 _x3 NaN"
    input_logs:
      - {at: 3m, line: "CUDA out of memory. Tried to allocate", labels: {run: r, node: n1}}
    alert_rule_test:
      - eval_time: 8m
        alertname: gpu_hot
      - eval_time: 10m
        alertname: gpu_hot
        exp_alerts:
          - exp_labels: {run: r, node: n1, gpu: "0"}
      - eval_time: 4m
        alertname: log_oom
        exp_alerts:
          - exp_labels: {run: r, node: n1}
"""


def _files(tmp_path: Path, tests: str) -> Path:
    (tmp_path / "rules.yaml").write_text(RULES)
    path = tmp_path / "tests.yaml"
    path.write_text(tests)
    return path


def _run(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    return [(r.name, r.failures) for r in run_rule_tests(path, DETECTORS, builtin_rules)]


def test_a_passing_file(tmp_path: Path) -> None:
    assert _run(_files(tmp_path, TESTS)) == [("hot gpu", ())]
    result = CliRunner().invoke(main, ["rules", "test", str(tmp_path / "tests.yaml")])
    assert result.exit_code == 0 and "1 of 1 tests passed" in result.output


def test_a_wrong_expectation_fails_and_says_what_was_found(tmp_path: Path) -> None:
    path = _files(tmp_path, TESTS.replace("eval_time: 10m", "eval_time: 9m"))
    ((name, failures),) = _run(path)
    assert name == "hot gpu"
    assert failures == (
        "gpu_hot at 9m: expected [{'run': 'r', 'node': 'n1', 'gpu': '0'}], got no alert",
    )
    result = CliRunner().invoke(main, ["rules", "test", str(path)])
    assert result.exit_code == 1 and "FAILED hot gpu: gpu_hot at 9m" in result.output


def test_the_builtin_pack_is_used_without_rule_files(tmp_path: Path) -> None:
    tests = textwrap.dedent(
        """\
        tests:
          - input_series:
              - series: 'train.loss{run="r"}'
                values: "2 1.9 NaN"
            alert_rule_test:
              - eval_time: 2m
                alertname: nonfinite_loss
                exp_alerts:
                  - exp_labels: {run: r}
        """
    )
    assert _run(_files(tmp_path, tests)) == [("test at line 2", ())]


def test_a_rule_held_for_a_duration_or_a_count_fires_on_whichever_comes_first(
    tmp_path: Path,
) -> None:
    (tmp_path / "rules.yaml").write_text(RULES.replace("for: 5m", "for: 5m or 3 samples"))
    tests = tmp_path / "tests.yaml"
    tests.write_text(TESTS.replace("eval_time: 8m", "eval_time: 6m").replace("10m", "7m"))
    assert _run(tests) == [("hot gpu", ())]  # 85 from 5m on: the 3rd sample at 7m, not 10m
    result = CliRunner().invoke(main, ["rules", "check", str(tmp_path / "rules.yaml")])
    assert result.exit_code == 0, result.output


MALFORMED = [
    (
        'values: "60x4 85x10"',
        'values: "60 hot"',
        "tests.yaml:6: tests[0].input_series[0].values: bad value 'hot'",
    ),
    (
        '\'gpu.temp_c{run="r", node="n1", gpu="0"}\'',
        "'gpu.temp_c{run=r}'",
        "tests.yaml:5: tests[0].input_series[0].series: bad label list",
    ),
    (
        "alertname: log_oom",
        "alertname: log_boom",
        "tests.yaml:19: tests[0].alert_rule_test[2].alertname: no rule named 'log_boom'",
    ),
]


@pytest.mark.parametrize(("bad", "good", "message"), MALFORMED)
def test_a_malformed_test_file_says_where(
    tmp_path: Path, bad: str, good: str, message: str
) -> None:
    assert bad in TESTS
    path = _files(tmp_path, TESTS.replace(bad, good, 1))
    with pytest.raises(RuleError) as caught:
        _run(path)
    assert str(caught.value).startswith(str(tmp_path / message))
