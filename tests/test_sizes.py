"""Sizes as people write them, read as bytes; anything else refused in words."""

from __future__ import annotations

import pytest

from stepwatch._sizes import parse_size

GIB = 1 << 30


@pytest.mark.parametrize(
    ("text", "size"),
    [("1048576", 1 << 20), ("512MiB", 512 << 20), ("2G", 2 * GIB), ("2 gb", 2 * GIB), ("0", 0)],
)
def test_sizes_read_as_bytes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "1.5G", "-1", "ten", "5 PiB"])
def test_a_size_that_is_none_is_refused_in_words(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)
