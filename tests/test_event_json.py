"""A field's text is found in the JSON the store writes of the fields that hold it, whatever
its key or value and whatever its neighbours."""

from __future__ import annotations

import pytest

from stepwatch._event_json import event_json, json_member


@pytest.mark.parametrize(
    ("key", "value"),
    [("node", "n0"), ("rank", "12"), ('we"ird', 'a "b", c: d'), ("zone", "zürich"), ("x", "")],
)
def test_a_field_s_text_is_in_the_fields_json(key: str, value: str) -> None:
    fields = {"a": "first", key: value, "zz": "last"}
    assert json_member(key, value) in event_json(fields)
    assert json_member(key, value + "!") not in event_json(fields)
