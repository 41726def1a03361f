"""JSON batches for curl: numbers or NaN/Inf strings, clear errors naming the sample at fault."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from stepwatch.model import NO_STEP, SeriesKey
from stepwatch.wire import WireError, decode_json, json_number, parse_value


def _body(samples: list[dict], **extra: object) -> bytes:
    return json.dumps({"source": "curl", "seq": 1, "samples": samples, **extra}).encode()


def test_json_batch_maps_names_and_groups_series() -> None:
    batch = decode_json(
        _body(
            [
                {"name": "loss", "labels": {"run": "r"}, "ts": 10, "step": 1, "value": 2.5},
                {"name": "loss", "labels": {"run": "r"}, "ts": 11, "step": 2, "value": "NaN"},
                {"name": "gpu.temp_c", "labels": {"run": "r", "gpu": 1}, "ts": 11, "value": "-Inf"},
            ]
        )
    )
    assert batch.keys == [
        SeriesKey.of("train.loss", {"run": "r"}),
        SeriesKey.of("gpu.temp_c", {"run": "r", "gpu": "1"}),
    ]
    assert list(batch.series) == [0, 0, 1]
    assert list(batch.step) == [1, 2, NO_STEP]
    np.testing.assert_array_equal(batch.value, [2.5, math.nan, -math.inf])


def test_missing_ts_takes_the_arrival_time() -> None:
    batch = decode_json(_body([{"name": "x", "value": 1}]), now=lambda: 123.0)
    assert batch.ts[0] == 123.0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "not valid JSON"),
        (b"[]", "must be a JSON object"),
        (
            json.dumps({"source": "s", "seq": 1, "version": 2}).encode(),
            "unsupported batch version 2",
        ),
        (json.dumps({"seq": 1}).encode(), "'source'"),
        (json.dumps({"source": "s", "seq": "1"}).encode(), "'seq'"),
        (json.dumps({"source": "s", "seq": 1, "samples": {}}).encode(), "must be lists"),
        (_body([1]), r"samples\[0\] must be an object"),
        (_body([{"name": "x"}]), r"samples\[0\]: missing 'value'"),
        (_body([{"name": "x", "value": "high"}]), r"samples\[0\]: value must be a number"),
        (_body([{"name": "x", "value": True}]), "got a boolean"),
        (_body([{"name": "x", "value": [1]}]), "value must be a number"),
        (_body([{"name": 5, "value": 1}]), "metric name must be a str"),
        (_body([{"name": "x", "value": 1, "ts": "now"}]), "'ts' must be a finite number"),
        (_body([{"name": "x", "value": 1, "step": -2}]), "'step' must be a non-negative"),
        (_body([{"name": "x", "value": 1, "labels": {"rank": [0]}}]), "label 'rank' must be"),
        (_body([], events=[{"ts": 1, "kind": ""}]), "'kind'"),
        # Beyond what the store's 64-bit columns and time buckets hold: refused, not a crash.
        (json.dumps({"source": "s", "seq": 2**64}).encode(), "'seq' must be a non-negative"),
        (_body([{"name": "x", "value": 1, "step": 2**63}]), "'step' must be a non-negative"),
        (_body([{"name": "x", "value": 1, "ts": 1e300}]), r"'ts' must be .* within ±1e\+11"),
        (_body([{"name": "x", "value": 1, "ts": 10**400}]), "'ts' must be a finite number"),
        (_body([{"name": "x", "value": 10**400}]), "too large for a float"),
        (_body([{"name": "x", "value": 1, "labels": "run=r"}]), "'labels' must be an object"),
        (_body([], events=[{"ts": 10**400, "kind": "k"}]), "event field 'ts' must be a finite"),
        (b'{"source": "s", "seq": 1, "events": [{"ts": NaN, "kind": "k"}]}', "event field 'ts'"),
    ],
)
def test_bad_json_is_rejected_with_a_reason(body: bytes, message: str) -> None:
    with pytest.raises(WireError, match=message):
        decode_json(body)


@pytest.mark.parametrize("x", [1.5, math.nan, math.inf, -math.inf])
def test_json_number_round_trips_through_parse_value(x: float) -> None:
    got = parse_value(json_number(x), "v")
    assert (math.isnan(got) and math.isnan(x)) or got == x
