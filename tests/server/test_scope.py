"""A caller's runs come from what the scope remembers per project, read from the store once and
kept current by the runs route, not from a list of every run per request."""

from __future__ import annotations

from pathlib import Path

from stepwatch.auth import Identity, Role
from stepwatch.model import Run
from stepwatch.server._scope import Scope
from stepwatch.store import Store


def test_runs_of_a_project_follow_new_and_moved_runs(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store:
        store.upsert_run(Run("a", project="p"), Run("b", project="q"))
        scope = Scope(store)
        p_only = Identity("p-viewer", Role.VIEWER, frozenset({"p"}))
        both = Identity("pq-viewer", Role.VIEWER, frozenset({"p", "q"}))
        assert scope.runs_of(p_only) == {"a"}
        assert scope.runs_of(both) == {"a", "b"}
        store.upsert_run(Run("c", project="p"), Run("b", project="p"))
        assert scope.runs_of(p_only) == {"a"}  # told by the runs route, not by the store
        scope.remember(Run("c", project="p"))
        scope.remember(Run("b", project="p"))
        assert scope.runs_of(p_only) == {"a", "b", "c"}
        assert scope.runs_of(both) == {"a", "b", "c"}
        assert scope.runs_of(Identity("admin", Role.ADMIN, None)) is None
