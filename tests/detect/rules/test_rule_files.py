"""Rule files over a base set: added rules, replaced rules, noticing a change, and every
mistake of a file reported at once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stepwatch.detect import DETECTORS, RuleError, RuleFiles, load_rules, parse_rules

BASE = """\
groups:
  - name: g
    rules:
      - alert: hot
        signal: {metric: gpu.temp_c, by: [node]}
        threshold: "> 80"
      - alert: nan_loss
        signal: {metric: loss}
        detector: nonfinite
"""

SITE = """\
groups:
  - name: g
    rules:
      - alert: hot
        signal: {metric: gpu.temp_c, by: [node]}
        threshold: "> 85"
  - name: site
    rules:
      - alert: disk
        signal: {metric: host.disk_free_bytes, by: [node]}
        threshold: "< 1e9"
"""


def test_files_add_rules_and_replace_those_of_the_same_group_and_name(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    rules = RuleFiles([site], base=parse_rules(BASE, "base.yaml", DETECTORS)).load()
    by_key = {r.key: r for r in rules.rules}
    assert set(by_key) == {("g", "hot"), ("g", "nan_loss"), ("site", "disk")}
    threshold = by_key["g", "hot"].threshold
    assert threshold is not None and threshold.level == 85.0


def test_a_later_file_wins_and_a_mistake_names_its_file(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(SITE)
    second.write_text(SITE.replace('"> 85"', '"> 90"'))
    (hot,) = [r for r in RuleFiles([first, second]).load().rules if r.alert == "hot"]
    assert hot.threshold is not None and hot.threshold.level == 90.0
    second.write_text("groups: [")
    with pytest.raises(RuleError, match="b.yaml"):
        RuleFiles([first, second]).load()


def test_changed_reports_each_modification_once(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    files = RuleFiles([site])
    assert not files.changed()
    site.write_text(SITE + "\n")
    assert files.changed() and not files.changed()
    stat = site.stat()
    os.utime(site, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert files.changed()
    site.unlink()
    assert files.changed()


#: Three mistakes; checking meets them in another order than their lines (the policies
#: section is read after the groups, a rule's severity after its detector).
THREE_MISTAKES = """\
policies:
  observe_only: maybe
groups:
  - name: g
    rules:
      - alert: hot
        severity: urgent
        signal: {metric: gpu.temp_c}
        detector: {type: cusum, shfit: 0.3}
      - alert: cold
        signal: {metric: gpu.temp_c, by: [node]}
        threshold: "< 10"
"""


def test_every_mistake_of_a_file_is_reported_in_line_order(tmp_path: Path) -> None:
    path = tmp_path / "three.yaml"
    path.write_text(THREE_MISTAKES)
    with pytest.raises(RuleError) as raised:
        load_rules(path, DETECTORS)
    expected = [
        f"{path}:2: policies.observe_only: expected true or false, got 'maybe'",
        f"{path}:7: groups[0].rules[0].severity: expected one of info, warning, critical, "
        "got 'urgent'",
        f"{path}:9: groups[0].rules[0].detector.shfit: detector 'cusum' takes no parameter 'shfit'",
    ]
    assert [str(p) for p in raised.value.problems] == expected
    assert str(raised.value) == "\n".join(expected)  # what the server prints when it refuses
    assert raised.value.line == 2
    with pytest.raises(RuleError, match="observe_only"):  # the running collector's reload too
        RuleFiles([path]).load()
