"""The exposition reader: what it accepts as exporters write it, and which line it refuses."""

from __future__ import annotations

import math

import pytest

from stepwatch.collect._scrape_parse import ExpositionError, parse_exposition

from .conftest import FIXTURES, exposition

GOOD = [
    ("up 1\n", {"up": [({}, 1.0)]}),
    ("up 1", {"up": [({}, 1.0)]}),
    ("# HELP up x\n# TYPE up gauge\n\n  \nup 0\n", {"up": [({}, 0.0)]}),
    ('a{x="1",y="two"} 2.5e+09\n', {"a": [({"x": "1", "y": "two"}, 2.5e9)]}),
    ('a{x="1",} 3\n', {"a": [({"x": "1"}, 3.0)]}),
    ("a{} 3\n", {"a": [({}, 3.0)]}),
    ('a{ x = "1" , y="2" } 3\n', {"a": [({"x": "1", "y": "2"}, 3.0)]}),
    ("a 4 1700000000000\n", {"a": [({}, 4.0)]}),
    ("a\t5\t-12\n", {"a": [({}, 5.0)]}),
    ('a{p="C:\\\\dir \\"q\\"\\nnext"} 1\n', {"a": [({"p": 'C:\\dir "q"\nnext'}, 1.0)]}),
    ('a{p="brace } and , comma"} 1\n', {"a": [({"p": "brace } and , comma"}, 1.0)]}),
    ("ns:rule_name 6\n", {"ns:rule_name": [({}, 6.0)]}),
    ("a 1\r\nb 2\r\n", {"a": [({}, 1.0)], "b": [({}, 2.0)]}),
    ('a{k="1"} 1\na{k="2"} 2\n', {"a": [({"k": "1"}, 1.0), ({"k": "2"}, 2.0)]}),
    ("x_total +Inf\ny -Inf\n", {"x_total": [({}, math.inf)], "y": [({}, -math.inf)]}),
]

BAD = [
    ("up\n", 1, "not a sample line"),
    ("ok 1\nup 1 2 3\n", 2, "not a sample line"),
    ('ok 1\n\nbad{x="1" 1\n', 3, "not a sample line"),
    ("bad notanumber\n", 1, "not a number"),
    ("bad 1_000\n", 1, "not a number"),
    ('bad{x="1"y="2"} 1\n', 1, "bad label"),
    ("bad{x=1} 1\n", 1, "bad label"),
    ('bad{x="1",x="2"} 1\n', 1, "given twice"),
    ('bad{1x="1"} 1\n', 1, "bad label"),
    ("<!DOCTYPE html>\n", 1, "not a sample line"),
    ("9lives 1\n", 1, "not a sample line"),
]


@pytest.mark.parametrize(("text", "expected"), GOOD)
def test_accepts(text: str, expected: dict[str, list[tuple[dict[str, str], float]]]) -> None:
    assert parse_exposition(text) == expected


def test_nan_is_kept() -> None:
    ((labels, value),) = parse_exposition("a NaN\n")["a"]
    assert labels == {} and math.isnan(value)


@pytest.mark.parametrize(("text", "line", "reason"), BAD)
def test_refuses_with_the_line(text: str, line: int, reason: str) -> None:
    with pytest.raises(ExpositionError) as caught:
        parse_exposition(text)
    assert caught.value.line == line
    assert f"line {line}" in str(caught.value) and reason in str(caught.value)


def test_every_fixture_parses_and_keeps_counter_names() -> None:
    for path in sorted(FIXTURES.glob("*_[12].prom")):
        metrics = parse_exposition(path.read_text())
        assert metrics, path.name
    dcgm = parse_exposition(exposition("dcgm_1.prom"))
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in dcgm  # typed counter, yet not renamed *_total
    assert len(dcgm["DCGM_FI_DEV_GPU_UTIL"]) == 2
