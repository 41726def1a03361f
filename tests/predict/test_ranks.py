"""The series that speaks for a run: the run's own, then rank 0, 1, ... in number order (not
text order), then ranks that are no number."""

from __future__ import annotations

from stepwatch.predict import rank_order


def test_ranks_go_by_number_after_the_run_and_before_what_is_no_number() -> None:
    ranks = ["node3", "10", None, "2", "0"]
    assert sorted(ranks, key=rank_order) == [None, "0", "2", "10", "node3"]
