"""The command queue: validation, order, answers, restore from the store, and its HTTP API."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from stepwatch.act import (
    AUDIT_EVENT,
    COMMAND_ACK_EVENT,
    COMMAND_EVENT,
    AuditRecord,
    CommandBook,
    CommandError,
)
from stepwatch.model import Event, RecordBatch, Run
from stepwatch.store import Store


def book() -> CommandBook:
    ids = (f"c{i}" for i in itertools.count(1))
    clock = itertools.count(100.0)
    return CommandBook(clock=lambda: float(next(clock)), new_id=lambda: next(ids))


@pytest.mark.parametrize(
    ("action", "args", "message"),
    [
        ("reboot", {}, "unknown action 'reboot'"),
        ("lower_lr", {"factor": 1.5}, "factor must be between 0 and 1"),
        ("lower_lr", {"factor": 0}, "factor must be between 0 and 1"),
        ("lower_lr", {"factor": "half"}, "factor must be a number"),
        ("lower_lr", {"rate": 0.5}, "lower_lr takes factor, not 'rate'"),
        ("checkpoint", {"path": 1}, "checkpoint takes no arguments, not 'path'"),
        ("skip_step", {"steps": 0.5}, "whole number >= 1"),
        ("stop", {"timeout_s": -1}, "timeout_s must be > 0"),
        ("stop", {"timeout_s": True}, "timeout_s must be a number"),
    ],
)
def test_bad_commands_are_refused_and_nothing_is_queued(
    action: str, args: dict[str, Any], message: str
) -> None:
    commands = book()
    with pytest.raises(CommandError, match=message):
        commands.issue("r1", action, args, by="me")
    assert commands.after("r1") == []


def test_commands_are_numbered_per_run_with_defaults_and_events() -> None:
    commands = book()
    first, events = commands.issue("r1", "lower_lr", by="alice", reason="loss diverges")
    second, _ = commands.issue("r1", "stop", {"timeout_s": 60}, by="alice")
    other, _ = commands.issue("r2", "checkpoint", by="bob")
    assert (first.seq, second.seq, other.seq) == (1, 2, 1)
    assert first.args == {"factor": 0.5} and second.args == {"timeout_s": 60.0}
    assert [c.id for c in commands.after("r1")] == [first.id, second.id]
    assert [c.id for c in commands.after("r1", 1)] == [second.id]
    assert [e.kind for e in events] == [COMMAND_EVENT, AUDIT_EVENT]
    audit = AuditRecord.from_event(events[1])
    assert (audit.action, audit.actor, audit.result) == ("command", "alice", "pending")
    assert audit.labels == {"run": "r1"} and audit.detail["command"] == first.id


def test_an_answer_is_recorded_once_and_a_retry_changes_nothing() -> None:
    commands = book()
    command, _ = commands.issue("r1", "lower_lr", by="me")
    answered, events = commands.ack("r1", command.id, "ok", detail="lr 0.1 -> 0.05", step=7)
    assert (answered.status, answered.step, answered.pending) == ("ok", 7, False)
    assert AuditRecord.from_event(events[1]).result == "ok"
    again, none = commands.ack("r1", command.id, "ok", detail="lr 0.1 -> 0.05", step=7)
    assert none == [] and again == answered
    with pytest.raises(CommandError, match="already answered"):
        commands.ack("r1", command.id, "failed")
    with pytest.raises(CommandError, match="result must be one of"):
        commands.ack("r1", command.id, "maybe")
    with pytest.raises(KeyError):
        commands.ack("r1", "nope", "ok")


@pytest.mark.parametrize(
    ("action", "ranks", "message"),
    [
        ("lower_lr", [3], "lower_lr is applied by every rank: it takes no ranks"),
        ("stop", [0, 1], "stop is applied by every rank"),
        ("profile", [-1], "a rank is a whole number >= 0"),
        ("profile", ["3"], "a rank is a whole number >= 0"),
    ],
)
def test_only_a_command_a_rank_applies_alone_names_ranks(
    action: str, ranks: list[object], message: str
) -> None:
    commands = book()
    with pytest.raises(CommandError, match=message):
        commands.issue("r1", action, ranks=ranks, by="me")
    assert commands.after("r1") == []


def _answers(events: list[Event]) -> list[tuple[str, object]]:
    return [(e.data["result"], e.data.get("rank")) for e in events if e.kind == COMMAND_ACK_EVENT]


def test_a_command_for_some_ranks_is_done_once_each_of_them_answered() -> None:
    commands = book()
    command, events = commands.issue("r1", "profile", {"steps": 3}, ranks=[5, 3, 5], by="me")
    assert command.ranks == (3, 5) and command.describe() == "profile(steps=3) on ranks 3, 5"
    assert AuditRecord.from_event(events[1]).detail["ranks"] == [3, 5]
    for rank in (None, 4):
        with pytest.raises(CommandError, match="is for ranks 3, 5: answer as one of them"):
            commands.ack("r1", command.id, "ok", rank=rank)
    first, events = commands.ack("r1", command.id, "ok", detail="from step 8", step=6, rank=5)
    assert first.pending and first.acked_ts is None and _answers(events) == [("pending", 5)]
    assert AuditRecord.from_event(events[1]).what == "rank 5 applied profile(steps=3) on ranks 3, 5"
    assert commands.ack("r1", command.id, "ok", detail="from step 8", step=6, rank=5)[1] == []
    with pytest.raises(CommandError, match="already answered 'ok' by rank 5"):
        commands.ack("r1", command.id, "failed", rank=5)
    done, events = commands.ack("r1", command.id, "failed", detail="no CUDA", step=4, rank=3)
    assert (done.status, done.step) == ("failed", 4) and done.acked_ts is not None
    assert done.detail == "rank 3: failed (no CUDA); rank 5: ok (from step 8)"
    assert _answers(events) == [("failed", 3)]
    assert events[0].data["answers"] == {
        "3": {"result": "failed", "detail": "no CUDA", "step": 4},
        "5": {"result": "ok", "detail": "from step 8", "step": 6},
    }
    everyone, _ = commands.issue("r1", "profile", by="me")
    assert everyone.ranks == () and commands.ack("r1", everyone.id, "ok", rank=7)[0].status == "ok"


def test_the_queue_is_rebuilt_from_the_stores_command_table(tmp_path: Path) -> None:
    commands = book()
    events = []
    a, more = commands.issue("r1", "lower_lr", by="me")
    events += more
    b, more = commands.issue("r1", "rollback", by="me")
    events += more
    _, more = commands.ack("r1", a.id, "failed", detail="no optimizer", step=3)
    events += more
    with Store(tmp_path / "s.duckdb") as store:
        store.upsert_run(Run("r1"))
        store.apply([RecordBatch.of("stepwatch.collector", events)])
        restored = book()
        restored.restore(store.current.commands(live=True))
    assert restored.after("r1") == commands.after("r1")
    assert [c.status for c in restored.after("r1")] == ["failed", "pending"]
    c, _ = restored.issue("r1", "stop", by="me")
    assert c.seq == b.seq + 1


def test_the_answers_of_some_ranks_survive_a_restart(tmp_path: Path) -> None:
    commands = book()
    command, events = commands.issue("r1", "profile", ranks=[1, 2, 3], by="me")
    for rank in (2, 1):
        events += commands.ack("r1", command.id, "ok", step=rank, rank=rank)[1]
    with Store(tmp_path / "s.duckdb") as store:
        store.upsert_run(Run("r1"))
        store.apply([RecordBatch.of("stepwatch.collector", events)])
        restored = book()
        restored.restore(store.current.commands(live=True))
        (back,) = restored.after("r1")
        assert back == commands.after("r1")[0] and back.pending and sorted(back.answers) == [1, 2]
        _, last = restored.ack("r1", command.id, "ok", step=9, rank=3)
        store.apply([RecordBatch.of("stepwatch.collector", last)])
        (row,) = store.current.commands("r1")
    assert (row["status"], row["step"], sorted(row["answers"])) == ("ok", 1, ["1", "2", "3"])
    assert row["acked_ts"] is not None


# ---- the HTTP API over the real collector ------------------------------------------------


def make_run(client: httpx.Client, run: str = "r1") -> None:
    assert client.post("/api/v1/runs", json={"id": run}).status_code == 200


def wait_for_events(url: str, kind: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 20
    while True:
        got: list[dict[str, Any]] = httpx.get(
            f"{url}/api/v1/events", params={"kind": kind}, timeout=10
        ).json()
        if len(got) >= count or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_the_api_queues_lists_and_takes_answers(server: Any) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        make_run(client)
        made = client.post(
            "/api/v1/runs/r1/commands",
            json={"action": "lower_lr", "args": {"factor": 0.25}},
        )
        assert made.status_code == 201
        command = made.json()
        assert (command["seq"], command["args"], command["status"]) == (
            1,
            {"factor": 0.25},
            "pending",
        )
        client.post("/api/v1/runs/r1/commands", json={"action": "checkpoint"})
        listed = client.get("/api/v1/runs/r1/commands", params={"after": 1}).json()
        assert [c["action"] for c in listed] == ["checkpoint"]
        ack = client.post(
            f"/api/v1/runs/r1/commands/{command['id']}/ack",
            json={"result": "ok", "detail": "lr 0.1 -> 0.025", "step": 12},
        )
        assert ack.status_code == 200 and ack.json()["status"] == "ok"
        pending = client.get("/api/v1/runs/r1/commands", params={"status": "pending"}).json()
        assert [c["action"] for c in pending] == ["checkpoint"]
        conflict = client.post(
            f"/api/v1/runs/r1/commands/{command['id']}/ack", json={"result": "failed"}
        )
        assert conflict.status_code == 409
    stored = wait_for_events(server.url, "command_ack", 1)
    assert [e["data"]["result"] for e in stored] == ["ok"]
    audits = wait_for_events(server.url, AUDIT_EVENT, 3)
    assert sorted(e["data"]["result"] for e in audits) == ["ok", "pending", "pending"]


def test_the_api_takes_the_ranks_of_a_command_and_each_rank_s_answer(server: Any) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        make_run(client)
        body = {"action": "profile", "args": {"steps": 2}, "ranks": [4, 1]}
        command = client.post("/api/v1/runs/r1/commands", json=body).json()
        assert (command["ranks"], command["answers"]) == ([1, 4], {})
        ack = f"/api/v1/runs/r1/commands/{command['id']}/ack"
        assert client.post(ack, json={"result": "ok"}).status_code == 409  # which rank?
        assert client.post(ack, json={"result": "ok", "rank": 2}).status_code == 409
        assert client.post(ack, json={"result": "ok", "step": 3, "rank": 4}).json()["status"] == (
            "pending"
        )
        (listed,) = client.get("/api/v1/runs/r1/commands", params={"status": "pending"}).json()
        assert listed["answers"] == {"4": {"result": "ok", "detail": "", "step": 3}}
        done = client.post(ack, json={"result": "ok", "step": 5, "rank": 1}).json()
        assert (done["status"], done["step"]) == ("ok", 3)
        refused = client.post("/api/v1/runs/r1/commands", json={"action": "stop", "ranks": [1]})
        assert refused.status_code == 400 and "takes no ranks" in refused.json()["error"]
        negative = client.post(
            "/api/v1/runs/r1/commands", json={"action": "profile", "ranks": [-1]}
        )
        assert negative.status_code == 400


@pytest.mark.parametrize(
    "body",
    [
        {"action": "reboot"},
        {"action": "lower_lr", "args": {"factor": 2}},
        {"action": "lower_lr", "extra": 1},
        {"args": {}},
        {"action": "stop", "args": {"timeout_s": "soon"}},
    ],
)
def test_bad_input_is_a_400_and_changes_nothing(server: Any, body: dict[str, Any]) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        make_run(client)
        reply = client.post("/api/v1/runs/r1/commands", json=body)
        assert reply.status_code == 400 and reply.json()["error"]
        assert client.get("/api/v1/runs/r1/commands").json() == []
        made = client.post("/api/v1/runs/r1/commands", json={"action": "rollback"}).json()
        bad_ack = client.post(
            f"/api/v1/runs/r1/commands/{made['id']}/ack", json={"result": "perhaps"}
        )
        assert bad_ack.status_code == 400
        assert client.get("/api/v1/runs/r1/commands").json()[0]["status"] == "pending"
        assert client.get("/api/v1/runs/r1/commands", params={"after": -1}).status_code == 400


def test_unknown_runs_and_commands_are_404(server: Any) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert (
            client.post("/api/v1/runs/ghost/commands", json={"action": "stop"}).status_code == 404
        )
        assert client.get("/api/v1/runs/ghost/commands").status_code == 404
        ack = client.post("/api/v1/runs/ghost/commands/c1/ack", json={"result": "ok"})
        assert ack.status_code == 404
        make_run(client)
        ack = client.post("/api/v1/runs/r1/commands/nope/ack", json={"result": "ok"})
        assert ack.status_code == 404 and "unknown command" in ack.json()["error"]


@pytest.mark.parametrize("status", ["finished", "failed", "killed"])
def test_a_command_for_a_run_that_ended_is_a_409_and_nothing_is_queued(
    server: Any, status: str
) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        make_run(client)
        assert client.post("/api/v1/runs/r1/finish", json={"status": status}).is_success
        reply = client.post("/api/v1/runs/r1/commands", json={"action": "stop"})
        assert reply.status_code == 409
        assert reply.json() == {"error": f"run 'r1' is {status}: it takes no more commands"}
        assert client.get("/api/v1/runs/r1/commands").json() == []
        assert client.get("/api/v1/events", params={"kind": AUDIT_EVENT}).json() == []


def test_commands_survive_a_restart_of_the_collector(server: Any) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        make_run(client)
        first = client.post("/api/v1/runs/r1/commands", json={"action": "checkpoint"}).json()
        client.post(f"/api/v1/runs/r1/commands/{first['id']}/ack", json={"result": "unsupported"})
        client.post("/api/v1/runs/r1/commands", json={"action": "stop"})
    server.restart()
    with httpx.Client(base_url=server.url, timeout=10) as client:
        listed = client.get("/api/v1/runs/r1/commands").json()
        assert [(c["seq"], c["action"], c["status"]) for c in listed] == [
            (1, "checkpoint", "unsupported"),
            (2, "stop", "pending"),
        ]
        third = client.post("/api/v1/runs/r1/commands", json={"action": "rollback"}).json()
        assert third["seq"] == 3
