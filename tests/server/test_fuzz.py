"""Schemathesis against the real collector with auth on, as every role and with no token: every
route answers without a server error, within the hang limit, with a status and a body that the
collector's own OpenAPI schema declares. Derandomized: a run repeats the last one's requests."""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
import schemathesis
from conftest import Collector, CollectorFactory
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.errors import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

#: Each role's token over the project "default"; None sends no token at all.
ROLES = ("ingest", "viewer", "operator", "admin", None)
#: Cases per operation, role and generation mode (valid input, then invalid): a fixed budget.
MAX_EXAMPLES = 8
#: An answer slower than this is a hang.
HANG_S = 20.0
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
#: Server-sent event streams answer for as long as the client listens: there is no end to check.
STREAMS = ("/api/v1/stream", "/api/v1/alerts/stream")


@schemathesis.serializer("application/gzip")
def _gzip(ctx: Any, value: Any) -> bytes:
    """A profile upload's body: what was generated, compressed (a trace or not)."""
    raw = value if isinstance(value, bytes) else str(value).encode()
    return gzip.compress(raw)


@dataclass
class Tally:
    """What the module sent and what came back, for its summary line."""

    runs: int = 0  # operations x roles
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        server_errors = sum(n for status, n in self.statuses.items() if status >= 500)
        answers = ", ".join(f"{status}: {n}" for status, n in sorted(self.statuses.items()))
        return (
            f"fuzz: {self.runs} operations x roles, {self.statuses.total()} requests, "
            f"{server_errors} server errors, {len(self.failures)} failing answers ({answers})"
        )


@pytest.fixture(scope="module")
def collector(module_collector_factory: CollectorFactory) -> Collector:
    return module_collector_factory(auth=True)


@pytest.fixture(scope="module")
def schema(collector: Collector) -> schemathesis.BaseSchema:
    """The schema the collector serves (to signed-in callers: the admin fetches it)."""
    return schemathesis.openapi.from_url(f"{collector.url}/openapi.json", headers=collector.headers)


@dataclass
class _Summary:
    """A plugin the module registers: its counts as a line of pytest's terminal summary."""

    tally: Tally

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_sep("-", self.tally.summary())


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    """Counts of the whole module, shown in the terminal summary (and printed, for ``-s``)."""
    found = Tally()
    request.config.pluginmanager.register(_Summary(found))
    yield found
    print(f"\n{found.summary()}")


def _operations(schema: schemathesis.BaseSchema) -> list[APIOperation]:
    operations = [result.ok() for result in schema.get_all_operations()]
    return [op for op in operations if op.path not in STREAMS]


def _fuzz(
    operation: APIOperation, mode: GenerationMode, call: dict[str, object], tally: Tally
) -> None:
    """``MAX_EXAMPLES`` cases of ``operation``; every failing answer is noted, none stops it."""

    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,  # the collector's speed is not under test; HANG_S catches a hang
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Case) -> None:
        try:
            response = case.call(**call, timeout=HANG_S)
        except requests.Timeout:
            tally.statuses[0] += 1
            tally.failures.append(f"{operation.label} ({mode}): no answer in {HANG_S} s (hang)")
            return
        tally.statuses[response.status_code] += 1
        try:
            case.validate_response(response, checks=CHECKS)
        except FailureGroup as exc:
            titles = ", ".join(sorted({f.title for f in exc.exceptions}))
            tally.failures.append(
                f"{operation.label} ({mode}) -> {response.status_code} {response.text[:200]}: "
                f"{titles}\n    {case.as_curl_command()}"
            )

    try:
        run()
    except Unsatisfiable:  # an operation without inputs has no invalid ones to send
        assert mode == GenerationMode.NEGATIVE, f"{operation.label}: no valid input to send"


@pytest.mark.parametrize("role", ROLES, ids=[r or "no-token" for r in ROLES])
def test_every_route_answers_as_declared(
    role: str | None, schema: schemathesis.BaseSchema, collector: Collector, tally: Tally
) -> None:
    headers = collector.headers_of(role) if role else {}
    operations = _operations(schema)
    assert len(operations) > 30  # the schema lists the API, not just the probes
    before = len(tally.failures)
    for operation in operations:
        tally.runs += 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            _fuzz(operation, mode, {"base_url": collector.url, "headers": headers}, tally)
    found = tally.failures[before:]
    assert not found, f"{len(found)} failing answers:\n" + "\n".join(found[:20])
