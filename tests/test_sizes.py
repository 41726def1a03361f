"""Sizes as people write them, read as bytes; anything else refused in words."""

from __future__ import annotations

import pytest

from stepwatch._sizes import parse_share, parse_size, parse_size_or_share

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


@pytest.mark.parametrize(
    ("text", "size"), [("25%", GIB), (" 100 % ", 4 * GIB), ("0.5%", 4 * GIB // 200), ("1G", GIB)]
)
def test_a_share_reads_as_that_part_of_the_whole(text: str, size: int) -> None:
    assert parse_size_or_share(text, 4 * GIB, "the memory") == size


@pytest.mark.parametrize(
    ("text", "said"),
    [("0%", "a share of the memory lies in (0, 100]%, got '0%'"),
     ("150%", "a share of the memory lies in (0, 100]%, got '150%'"),
     ("half", "not a size: 'half' (bytes, a number with KiB, MiB, GiB or TiB, or a share of the "
              "memory such as 25%)")],
)  # fmt: skip
def test_a_share_or_size_that_is_none_is_refused_in_words(text: str, said: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_size_or_share(text, 4 * GIB, "the memory")
    assert str(refused.value) == said
    assert parse_share("2G", "the memory") is None
