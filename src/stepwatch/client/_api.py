"""The collector's API as calls, for every front end: the CLI's commands render what these
return and `stepwatch top` builds its frames from them; none of them makes a request itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._http import ApiSession

__all__ = ["CollectorClient"]


def _params(**given: Any) -> dict[str, Any]:
    """The query parameters that were given (None: left out)."""
    return {k: v for k, v in given.items() if v is not None}


class CollectorClient(ApiSession):
    """Reads and changes what a running collector holds: alerts, silences, actions, the audit
    trail, tokens, runs and their data (the session's arguments: its address, token, TLS,
    timeout, transport and page size)."""

    # ---- alerts and silences -------------------------------------------------------------

    def alerts(
        self,
        run: str | None = None,
        state: str = "open",
        kind: str | None = None,
        limit: int | None = 1000,
    ) -> list[dict[str, Any]]:
        """The latest state of each alert, newest first: ``limit`` of them (None: all)."""
        return self.pages("/alerts", _params(state=state, run=run, kind=kind), limit)

    def groups(
        self, by: str, run: str | None = None, state: str = "open", kind: str | None = None
    ) -> list[dict[str, Any]]:
        params = _params(by=by, state=state, run=run, kind=kind)
        return list(self.call("GET", "/alerts/groups", params=params))

    def incidents(self, run: str | None = None, state: str = "all") -> list[dict[str, Any]]:
        """The alerts as incidents, newest first, each with its ranked causes."""
        params = _params(run=run, state=state)
        return list(self.call("GET", "/alerts/incidents", params=params))

    def add_silence(
        self, matchers: Sequence[str], duration_s: float, comment: str = ""
    ) -> dict[str, Any]:
        body = {"matchers": list(matchers), "duration_s": duration_s, "comment": comment}
        return dict(self.call("POST", "/silences", json=body))

    def silences(self, include_ended: bool = False) -> list[dict[str, Any]]:
        return list(self.call("GET", "/silences", params={"all": include_ended}))

    def expire_silence(self, silence_id: str) -> dict[str, Any]:
        return dict(self.call("DELETE", f"/silences/{silence_id}"))

    # ---- actions, audit and tokens -------------------------------------------------------

    def actions(
        self, run: str | None = None, state: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """The actions as they stand, newest request first: ``limit`` of them (None: all)."""
        return self.pages("/actions", _params(run=run, state=state), limit)

    def action(self, action_id: str) -> dict[str, Any]:
        return dict(self.call("GET", f"/actions/{action_id}"))

    def request_action(
        self, playbook: str, labels: Mapping[str, str], dry_run: bool | None = None
    ) -> dict[str, Any]:
        body = {"playbook": playbook, "labels": dict(labels), "dry_run": dry_run}
        return dict(self.call("POST", "/actions", json=body))

    def decide(self, action_id: str, verb: str, comment: str = "") -> dict[str, Any]:
        """``verb`` is ``approve`` or ``reject`` (the token says who decides)."""
        body = {"comment": comment}
        return dict(self.call("POST", f"/actions/{action_id}/{verb}", json=body))

    def audit(
        self,
        run: str | None = None,
        action: str | None = None,
        kind: str | None = None,
        limit: int | None = 1000,
    ) -> list[dict[str, Any]]:
        """The audit records, newest first: ``limit`` of them (None: all)."""
        return self.pages("/audit", _params(run=run, action=action, kind=kind), limit)

    def audit_head(self) -> dict[str, Any]:
        """The last record's seq and the hash that chains every record before it."""
        return dict(self.call("GET", "/audit/head"))

    def tokens(self) -> list[dict[str, Any]]:
        return list(self.call("GET", "/tokens"))

    def create_token(
        self, role: str, projects: Sequence[str], name: str | None, expires: str | None
    ) -> dict[str, Any]:
        body = {"role": role, "projects": list(projects), "name": name, "expires": expires}
        return dict(self.call("POST", "/tokens", json=body))

    def revoke_token(self, key: str) -> dict[str, Any]:
        return dict(self.call("DELETE", f"/tokens/{key}"))

    # ---- runs and their data -------------------------------------------------------------

    def runs(self) -> list[dict[str, Any]]:
        return list(self.call("GET", "/runs"))

    def run(self, run_id: str) -> dict[str, Any]:
        """One run's record; a ClientError with status 404 when there is no such run."""
        return dict(self.call("GET", f"/runs/{run_id}"))

    def command(
        self, run: str, action: str, args: Mapping[str, float], ranks: Sequence[int] = ()
    ) -> dict[str, Any]:
        """Tell ``run`` to do ``action`` (with ``args``) at its next step boundary, on
        ``ranks`` only when given."""
        body: dict[str, Any] = {"action": action, "args": dict(args)}
        if ranks:
            body["ranks"] = list(ranks)
        return dict(self.call("POST", f"/runs/{run}/commands", json=body))

    def profiles(self, run: str) -> list[dict[str, Any]]:
        """The profiler traces kept of ``run``, newest first."""
        return list(self.call("GET", f"/runs/{run}/profiles"))

    def profile_trace(self, run: str, profile_id: str) -> bytes:
        """One trace's bytes (gzip-compressed Chrome trace JSON)."""
        response = self.response("GET", f"/runs/{run}/profiles/{profile_id}")
        if response.is_error:
            self.decode(response)  # the refusal, as a ClientError
        return response.content

    def latest(self, run: str) -> list[dict[str, Any]]:
        """The newest sample of every series of ``run``."""
        return list(self.call("GET", "/query/latest", params={"run": run}))

    def series(self, name: str, run: str, labels: Sequence[str] = ()) -> list[dict[str, Any]]:
        """The series of metric ``name`` in ``run`` with every ``key:value`` of ``labels``."""
        params = {"name": name, "run": run, "label": list(labels)}
        return list(self.call("GET", "/series", params=params))

    def raw(self, series: int, start: float) -> dict[str, list[Any]]:
        """A series' samples since ``start``, as columns (ts, step, value)."""
        params = {"series": series, "start": start}
        return dict(self.call("GET", "/query/raw", params=params))

    def percentiles(
        self, name: str, run: str, start: float, q: str, points: int
    ) -> list[dict[str, Any]]:
        """Quantiles ``q`` of metric ``name`` across ``run``'s series since ``start``, in
        ``points`` buckets, one group per label set."""
        params = {"name": name, "run": run, "start": start, "q": q, "points": points}
        return list(self.call("GET", "/query/percentiles", params=params))
