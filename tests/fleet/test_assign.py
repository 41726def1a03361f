"""Rendezvous ownership: every partition has one owner, and a member leaving or joining moves
only the partitions it had or gains."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stepwatch.fleet import owned_by, owner

MEMBERS = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=6, unique=True)


@given(MEMBERS, st.integers(1, 64))
def test_every_partition_has_exactly_one_owner(members: list[str], partitions: int) -> None:
    shares = [owned_by(m, partitions, members) for m in members]
    assert sorted(p for share in shares for p in share) == list(range(partitions))


@given(MEMBERS, st.integers(1, 64), st.data())
def test_a_member_leaving_moves_only_its_partitions(
    members: list[str], partitions: int, data: st.DataObject
) -> None:
    gone = data.draw(st.sampled_from(members))
    left = [m for m in members if m != gone]
    for p in range(partitions):
        before = owner(p, members)
        if before != gone:
            assert owner(p, left) == before


def test_the_answer_does_not_depend_on_the_order_heard() -> None:
    members = ["c0", "c1", "c2"]
    assert [owner(p, members) for p in range(32)] == [owner(p, members[::-1]) for p in range(32)]
    assert owner(0, []) is None
    assert len({owner(p, members) for p in range(32)}) == 3  # spread over all of them
