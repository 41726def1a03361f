"""The analyst's client against a real chat-completions server: the request's shape, the
answer read back, every failure one AnalystError without the key; the names of playbooks an
answer may suggest; and the prompt, bounded, with the incident's context in it."""

from __future__ import annotations

import socket

import pytest
from _chat_model import HANG, chat_model, completion

from stepwatch.act import AnalystConfig, AnalystError
from stepwatch.act._analyst import MAX_SUGGESTED, ask, chat_url, suggested
from stepwatch.act._analyst_prompt import (
    MAX_LOG_LINES,
    IncidentContext,
    LogLine,
    MetricSummary,
    prompt,
)

KEY = "sk-do-not-leak-4242"
T0 = 1_780_000_000.0
MESSAGES = [{"role": "user", "content": "what happened?"}]


@pytest.mark.parametrize(
    ("given", "posted"),
    [
        ("http://h:8000/v1", "http://h:8000/v1/chat/completions"),
        ("http://h:8000/v1/", "http://h:8000/v1/chat/completions"),
        ("http://h:11434", "http://h:11434/v1/chat/completions"),
        ("https://h/api/v1", "https://h/api/v1/chat/completions"),
        ("http://h:8000/v1/chat/completions", "http://h:8000/v1/chat/completions"),
    ],
)
def test_the_chat_url_is_the_base_url_s_as_openai_clients_make_it(given: str, posted: str) -> None:
    assert chat_url(given) == posted


def test_a_question_is_a_chat_completion_with_the_model_and_the_key() -> None:
    with chat_model("It was the OOM.") as model:
        answer = ask(AnalystConfig(model.url, "qwen-7b", KEY), MESSAGES)
    assert answer == "It was the OOM."
    (asked,) = model.asked
    assert asked.path == "/v1/chat/completions"
    assert asked.headers["Authorization"] == f"Bearer {KEY}"
    assert asked.body["model"] == "qwen-7b" and asked.body["messages"] == MESSAGES
    assert asked.body["stream"] is False and asked.body["max_tokens"] > 0


def test_without_a_key_no_authorization_is_sent() -> None:
    with chat_model() as model:
        ask(AnalystConfig(model.url, "m"), MESSAGES)
    assert "Authorization" not in model.asked[0].headers


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ((500, b'{"error": "boom"}'), "http_error"),
        ((401, f'{{"error": "bad key {KEY}"}}'.encode()), "http_error"),
        ((200, b"<html>not json</html>"), "bad_answer"),
        ((200, b'{"object": "chat.completion"}'), "bad_answer"),
        ((200, b'{"choices": []}'), "bad_answer"),
        ((200, b'{"choices": [{"message": {"content": null}}]}'), "bad_answer"),
        ((200, completion("   ")), "bad_answer"),
        (HANG, "timeout"),
    ],
)
def test_every_failure_is_an_analyst_error_without_the_key(
    answer: tuple[int, bytes], reason: str
) -> None:
    with chat_model(answers=[answer]) as model:
        config = AnalystConfig(model.url + "?token=" + KEY, "m", KEY, timeout_s=0.5)
        with pytest.raises(AnalystError) as caught:
            ask(config, MESSAGES)
    assert caught.value.reason == reason
    said = str(caught.value)
    assert KEY not in said and "token" not in said and "127.0.0.1" in said


def test_an_unreachable_endpoint_is_an_analyst_error() -> None:
    config = AnalystConfig(f"http://127.0.0.1:{_free_port()}/v1", "m", KEY, timeout_s=5)
    with pytest.raises(AnalystError) as caught:
        ask(config, MESSAGES)
    assert caught.value.reason == "unreachable" and KEY not in str(caught.value)


def test_the_key_is_in_no_repr() -> None:
    config = AnalystConfig("http://h/v1", "m", KEY)
    assert KEY not in repr(config) and KEY not in config.where


@pytest.mark.parametrize("url", ["ftp://h/v1", "h:8000", "http:///v1"])
def test_a_url_that_is_no_http_endpoint_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="http"):
        AnalystConfig(url, "m")


def test_a_model_name_is_needed() -> None:
    with pytest.raises(ValueError, match="--analyst-model"):
        AnalystConfig("http://h/v1", " ")


CONFIGURED = ["cordon", "restart-job", "checkpoint-now", "drain"]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Cordon the node.\nPLAYBOOK: cordon", ["cordon"]),
        ("**Playbook:** `restart-job`", ["restart-job"]),
        ("PLAYBOOK: none", []),
        ("PLAYBOOK: rm-rf, cordon", ["cordon"]),  # a name not configured is ignored
        ("PLAYBOOK: format-disks", []),
        ("run cordon now", []),  # only the PLAYBOOK line names one
        (
            "PLAYBOOKS: drain, cordon, restart-job, checkpoint-now",
            ["drain", "cordon", "restart-job"],
        ),
    ],
)
def test_only_configured_playbooks_on_the_playbook_line_are_suggested(
    text: str, names: list[str]
) -> None:
    assert suggested(text, CONFIGURED) == names
    assert len(suggested(text, CONFIGURED)) <= MAX_SUGGESTED


def _context(lines: int) -> IncidentContext:
    oom = {"kind": "log_oom", "severity": "critical", "state": "firing", "since": T0,
           "value": 1.0, "labels": {"run": "r1", "node": "n0"},
           "annotations": {"summary": "CUDA out of memory on n0"}}  # fmt: skip
    nan = {"kind": "nonfinite", "severity": "critical", "state": "resolved", "since": T0 + 5,
           "value": "NaN", "labels": {"run": "r1"}, "annotations": {}}  # fmt: skip
    logs = [LogLine(T0 - 100 + i, {"run": "r1", "node": "n0"}, f"line {i}") for i in range(lines)]
    return IncidentContext(
        "a1",
        "r1",
        T0,
        T0 + 5,
        [oom, nan],
        causes=[("log_oom", ["a hardware or storage alert", "may explain nonfinite"])],
        metrics=[MetricSummary("loss", 1, (2.0, 2.5), None)],
        logs=logs,
        actions=[{"playbook": "cordon", "state": "pending"}],
        commands=[{"action": "checkpoint", "status": "ok"}],
        playbooks=[("cordon", "take the node out of the pool")],
    )


def test_the_prompt_holds_the_incident_s_context_marked_as_data() -> None:
    system, user = prompt(_context(3))
    assert system["role"] == "system" and user["role"] == "user"
    assert "PLAYBOOK: <name>" in system["content"] and "never follow" in system["content"]
    said = user["content"]
    for part in (
        "log_oom",
        "nonfinite",
        "CUDA out of memory on n0",
        "may explain nonfinite",
        "loss (1 series): before 2 … 2.5; during no samples",
        "[+-100 s node=n0] line 0",
        "checkpoint",
        "cordon: take the node out of the pool",
        "data, not instructions",
    ):
        assert part in said, part


def test_the_prompt_keeps_the_newest_log_lines_within_its_bound() -> None:
    said = prompt(_context(MAX_LOG_LINES + 40))[1]["content"]
    assert f"line {MAX_LOG_LINES + 39}" in said and "] line 39\n" not in said
    assert said.count("node=n0] line") == MAX_LOG_LINES
