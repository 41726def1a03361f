"""The analyses table: an analysis replaces the failed tries before it and is never undone by
a later failure, tries count up, text is cut to its bound, the oldest rows go beyond the
table's bound, and all of it outlives a reopening."""

from __future__ import annotations

from pathlib import Path

from stepwatch.store import MAX_ANALYSIS_CHARS, Store
from stepwatch.store._analyses import Analyses

from .conftest import T0


def test_tries_count_until_an_analysis_which_a_failure_never_undoes(store_path: Path) -> None:
    with Store(store_path) as store:
        kept = store.analyses
        assert kept.get("i1") is None
        assert kept.failed("i1", "r1", T0, "m", "HTTP 500") == 1
        assert kept.failed("i1", "r1", T0 + 1, "m", "timeout") == 2
        failed = kept.get("i1")
        assert (
            failed is not None
            and not failed.done
            and (failed.error, failed.at) == ("timeout", T0 + 1)
        )
        done = kept.put("i1", "r1", T0 + 2, "m", "the OOM", ["cordon"])
        assert (done.tries, done.done, done.playbooks) == (3, True, ("cordon",))
        assert kept.failed("i1", "r1", T0 + 3, "m", "timeout") == 3
    with Store(store_path) as store:
        assert store.analyses.get("i1") == done
        assert store.analyses.of_incidents(["i1", "i2"]) == {"i1": done}


def test_text_and_rows_are_bounded(store_path: Path) -> None:
    with Store(store_path) as store:
        kept = Analyses(store._lock, store._txn, max_rows=3)
        long = kept.put("i0", None, T0, "m", "x" * (MAX_ANALYSIS_CHARS + 10), [])
        assert long.text == "x" * MAX_ANALYSIS_CHARS
        for i in range(1, 5):
            kept.put(f"i{i}", "r1", T0 + i, "m", "text", [])
        assert sorted(kept.of_incidents([f"i{i}" for i in range(5)])) == ["i2", "i3", "i4"]
