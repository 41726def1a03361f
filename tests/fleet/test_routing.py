"""Two collectors with tokens and one fleet key: either answers for every run (the run's own
requests by the collector that holds it, the runs lists merged), for the same caller, with the
same refusals; a token made or revoked on one holds or fails on both; nobody else can speak for
a caller."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _rabbitmq import Broker
from conftest import Collector, CollectorFactory

from stepwatch.server import CALLER_HEADER, HOP_HEADER

from ._fleet import balanced, eventually, finished, fleet_args, run_of, stored_steps, train

STEPS = 50


@pytest.fixture(scope="module")
def fleet(
    broker: Broker, module_collector_factory: CollectorFactory, fleet_key: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Collector, Collector, str, str]]:  # fmt: skip
    """c0 and c1, and a run each holds, trained with an ingest token made on c0 only."""
    c0 = module_collector_factory(auth=True, extra_args=fleet_args(broker, "c0", fleet_key))
    c1 = module_collector_factory(auth=True, extra_args=fleet_args(broker, "c1", fleet_key))
    eventually(lambda: balanced([c0, c1]), "the two collectors to share the partitions")
    on0, on1 = run_of(["c0", "c1"], "c0", "on0"), run_of(["c0", "c1"], "c1", "on1")
    token = c0.tokens["ingest", "default"]
    finished(train(broker, tmp_path_factory.mktemp("spool"), [on0, on1], STEPS, 0.0,
                   "default", token))  # fmt: skip
    for collector, run in ((c0, on0), (c1, on1)):
        got = eventually(lambda c=collector, r=run: len(stored_steps(c, r, here=True)) >= STEPS
                         and stored_steps(c, r, here=True), f"{run} stored")  # fmt: skip
        assert got == list(range(STEPS))
    assert not stored_steps(c0, on1, here=True) and not stored_steps(c1, on0, here=True)
    yield c0, c1, on0, on1


def _get(collector: Collector, path: str, headers: dict[str, str], **params: Any) -> Any:
    return httpx.get(f"{collector.url}{path}", headers=headers, params=params, timeout=30)


def test_either_collector_answers_for_every_run(fleet: tuple[Any, ...]) -> None:
    c0, c1, on0, on1 = fleet
    for entry in (c0, c1):
        admin = entry.headers  # c0's admin token and c1's: each made on its own collector
        listed = _get(entry, "/api/v1/runs", admin).json()
        assert {on0, on1} <= {r["id"] for r in listed}
        summary = _get(entry, "/api/v1/runs/summary", admin).json()
        assert {on0, on1} <= {r["id"] for r in summary}
        for run in (on0, on1):
            assert _get(entry, f"/api/v1/runs/{run}", admin).json()["status"] == "finished"
            assert stored_steps(entry, run) == list(range(STEPS))
            multi = _get(entry, "/api/v1/query/multi", admin, run=run, name="train.loss",
                         start=0, end=4e9).json()  # fmt: skip
            assert [s["labels"]["run"] for s in multi["series"]] == [run]


def test_a_caller_keeps_their_role_and_projects_through_another_collector(
    fleet: tuple[Any, ...],
) -> None:
    c0, c1, on0, on1 = fleet
    stranger = c0.headers_of("viewer", "other")  # made on c0: sees project "other" only
    assert _get(c0, f"/api/v1/runs/{on1}", stranger).status_code == 404  # answered by c1
    assert not {on0, on1} & {r["id"] for r in _get(c0, "/api/v1/runs", stranger).json()}
    ingest = c0.headers_of("ingest", "default")  # writes, reads nothing
    assert _get(c0, f"/api/v1/runs/{on1}", ingest).status_code == 403
    assert _get(c0, f"/api/v1/runs/{on1}", {}).status_code == 401
    assert _get(c0, f"/api/v1/runs/{on1}", {"Authorization": "Bearer sw_wrong"}).status_code == 401


def test_nobody_but_a_member_can_vouch_for_a_caller(fleet: tuple[Any, ...]) -> None:
    c0, c1, on0, on1 = fleet
    path = f"/api/v1/runs/{on1}"
    forged = {HOP_HEADER: "1", CALLER_HEADER: "0" * 64 + ".1.deadbeef"}
    assert _get(c1, path, forged).status_code == 401
    vouched = c0.headers  # a real token, but a word signed with another key
    assert _get(c1, path, {**vouched, CALLER_HEADER: "ab.1.cd"}).status_code == 401
    assert _get(c1, path, {HOP_HEADER: "1"}).status_code == 401  # a hop proves nobody


def test_a_token_made_or_revoked_on_one_collector_holds_or_fails_on_both(
    fleet: tuple[Any, ...],
) -> None:
    c0, c1, on0, _ = fleet
    asked = {"role": "viewer", "projects": ["default"], "name": "roaming"}
    made = httpx.post(f"{c0.url}/api/v1/tokens", headers=c0.headers, json=asked, timeout=30)
    assert made.status_code == 201, made.text
    roaming = {"Authorization": f"Bearer {made.json()['token']}"}
    eventually(lambda: _get(c1, "/api/v1/fleet", roaming).status_code == 200, "c1 to know it")
    assert _get(c1, f"/api/v1/runs/{on0}", roaming).status_code == 200
    gone = httpx.delete(f"{c0.url}/api/v1/tokens/roaming", headers=c0.headers, timeout=30)
    assert gone.is_success, gone.text
    eventually(lambda: _get(c1, "/api/v1/fleet", roaming).status_code == 401, "c1 to refuse it")


def test_a_run_s_live_stream_is_relayed_from_its_owner(
    fleet: tuple[Any, ...], broker: Broker, tmp_path: Path
) -> None:
    c0, _, _, on1 = fleet
    heard: list[str] = []

    def listen() -> None:
        with httpx.stream("GET", f"{c0.url}/api/v1/stream", params={"run": on1},
                          headers=c0.headers, timeout=30) as answer:  # fmt: skip
            heard.append(f"status {answer.status_code}")
            for line in answer.iter_lines():
                heard.append(line)
                if line.startswith("data:") and on1 in line:
                    return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    eventually(lambda: ": connected" in heard, "the relayed stream to open")
    token = c0.tokens["ingest", "default"]
    finished(train(broker, tmp_path, [on1], 5, 0.0, "default", token))
    listener.join(timeout=30)
    assert heard[0] == "status 200"
    assert any(line.startswith("data:") and on1 in line for line in heard), heard
