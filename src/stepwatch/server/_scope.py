"""Projects are tenants: which runs a caller sees, and the one 404 for a run it may not see.

Every run belongs to a project; data with a ``run`` label belongs to that run's project, and
data with none (a node agent's host metrics, fleet-level alerts) to no project, so only
identities of every project see it. A run of another project answers exactly as an unknown
run does, so its existence does not leak.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from ..auth import Identity
from ..model import Run
from ..store import LabelMatch, Store
from ._errors import ApiError
from ._params import label_match

__all__ = ["Scope", "unknown_run"]


def unknown_run(run_id: str) -> ApiError:
    """The answer for a run that does not exist, or that the caller may not see."""
    return ApiError(404, f"unknown run {run_id!r}")


class Scope:
    """Run -> project and project -> runs, remembered, over the store's runs (a run is made
    or moves only by the runs route, which tells ``remember``): a request costs the same with
    ten thousand runs as with ten."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._project: dict[str, str] = {}
        self._runs: dict[str, frozenset[str]] | None = None  # read from the store when first asked

    def remember(self, run: Run) -> None:
        """Note the project of a run just stored."""
        with self._lock:
            before = self._project.get(run.id)
            self._project[run.id] = run.project
            if self._runs is not None and before != run.project:
                if before is not None:
                    self._runs[before] = self._runs[before] - {run.id}
                self._runs[run.project] = self._runs.get(run.project, frozenset()) | {run.id}

    def _by_project(self) -> dict[str, frozenset[str]]:
        with self._lock:
            if self._runs is None:
                every = self.store.list_runs()
                self._project.update((r.id, r.project) for r in every)
                found: dict[str, set[str]] = {}
                for run_id, project in self._project.items():
                    found.setdefault(project, set()).add(run_id)
                self._runs = {p: frozenset(ids) for p, ids in found.items()}
            return self._runs

    def project_of(self, run_id: str | None) -> str | None:
        """The project of a run; None for no run or an unknown one (asked again next time)."""
        if run_id is None:
            return None
        with self._lock:
            found = self._project.get(run_id)
        if found is None:
            run = self.store.get_run(run_id)
            if run is None:
                return None
            self.remember(run)
            found = run.project
        return found

    def run(self, who: Identity, run_id: str) -> Run:
        """The run, when the caller may see it; else the 404 of an unknown run."""
        run = self.store.get_run(run_id)
        if run is None or not who.sees(run.project):
            raise unknown_run(run_id)
        self.remember(run)
        return run

    def runs_of(self, who: Identity) -> frozenset[str] | None:
        """The ids of the runs the caller sees; None when it sees every project (and data of
        no run)."""
        if who.projects is None:
            return None
        runs = self._by_project()
        found = [runs.get(p, frozenset()) for p in who.projects]
        return found[0] if len(found) == 1 else frozenset().union(*found)

    def sees(self, who: Identity, labels: Mapping[str, str]) -> bool:
        """Whether data with these labels is the caller's (by its run's project)."""
        return who.projects is None or who.sees(self.project_of(labels.get("run")))

    def hears(self, who: Identity) -> Callable[[str | None], bool]:
        """A live stream's filter: whether news of a run (None: of no run) is the caller's."""
        if who.projects is None:
            return lambda run: True
        return lambda run: who.sees(self.project_of(run))

    def match(self, who: Identity, run: str | None, labels: list[str] | None) -> LabelMatch | None:
        """A query's label filter, limited to the caller's runs (another project's run, like an
        unknown one, matches nothing)."""
        match: dict[str, str | frozenset[str]] = dict(label_match(run, labels) or {})
        mine = self.runs_of(who)
        if mine is not None:
            given = match.get("run")
            match["run"] = mine if given is None else mine & {str(given)}
        return match or None
