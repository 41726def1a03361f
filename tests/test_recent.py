"""The map of entries used lately keeps the ``limit`` last used, a read counting as a use."""

from __future__ import annotations

from stepwatch._recent import Recent


def test_the_least_recently_used_goes_first() -> None:
    recent: Recent[tuple[str, str], int] = Recent(2)
    recent.put(("r1", "a"), 1)
    recent.put(("r1", "b"), 2)
    assert recent.get(("r1", "a")) == 1  # used: now the newest
    recent.put(("r2", "c"), 3)
    assert len(recent) == 2 and recent.get(("r1", "b")) is None
    assert (recent.get(("r1", "a")), recent.get(("r2", "c"))) == (1, 3)
