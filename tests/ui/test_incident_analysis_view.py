"""The incidents view of a collector with playbooks and an analyst model (a real local chat
server): a card shows the playbooks its root cause requested with their actions' states, and
the model's analysis in a block marked as the model's, its text shown as text (an answer that
holds HTML runs nothing), the playbook it names as a suggestion that requested nothing; asking
the model again from the page brings its new answer (the last test: it changes the analysis)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _chat_model import ChatModel, chat_model
from conftest import CollectorFactory, make_loss_doc, poll
from playwright.sync_api import Page, expect

from .conftest import Dashboard

WAIT_S = 30.0
RUN = "oom-run"
MODEL = "test-model"
OOM = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
PLAYBOOKS = """\
playbooks:
  - name: cordon
    kind: command
    argv: [echo, "{node}"]
    dry_run: false
    triggers: [log_oom]
    description: take the node out of the pool
  - name: drain
    kind: command
    argv: [echo, "{node}"]
    description: move the node's jobs elsewhere
"""
#: The model's first answer: markup that would run if the page parsed it as HTML.
ANSWER = (
    'The OOM on node0 made the loss NaN. <img src=x onerror="document.body.dataset.pwned=1">'
    "<b>not bold</b>\nPLAYBOOK: drain"
)
#: Its answer when asked again.
AGAIN = "Asked again: <script>document.body.dataset.pwned=2</script>still the OOM.\nPLAYBOOK: none"


@pytest.fixture(scope="module")
def model() -> Iterator[ChatModel]:
    """The analyst model's server, answering ``ANSWER`` until a test changes its text."""
    with chat_model(ANSWER) as running:
        yield running


def _incidents(api: httpx.Client) -> list[dict[str, Any]]:
    got = api.get("/api/v1/alerts/incidents")
    assert got.status_code == 200, got.text
    return list(got.json())


@pytest.fixture(scope="module")
def analysed(
    model: ChatModel,
    module_collector_factory: CollectorFactory,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[str, dict[str, Any]]:
    """A collector with ``PLAYBOOKS`` and the model as its analyst, where ``RUN`` logged an
    OOM on node0 and then a NaN loss; its URL and the incident once the model analysed it
    (asked at once rather than at the analyst's next passes)."""
    playbooks = tmp_path_factory.mktemp("playbooks") / "playbooks.yaml"
    playbooks.write_text(PLAYBOOKS)
    args = ("--playbooks", str(playbooks), "--analyst", model.url, "--analyst-model", MODEL)
    collector = module_collector_factory(extra_args=args)
    t0 = time.time() - 600
    with httpx.Client(base_url=collector.url, timeout=WAIT_S) as api:
        run = {"id": RUN, "project": "ui-tests", "name": RUN, "start": t0}
        assert api.post("/api/v1/runs", json=run).is_success
        oom = {"ts": t0 + 1, "kind": "log", "text": OOM, "labels": {"run": RUN, "node": "node0"}}
        for doc in (
            {"source": "logs-n0", "seq": 1, "events": [oom]},
            make_loss_doc(1, RUN, [1.0, 1.0, 1.0, "NaN"], t0),
        ):
            assert api.post("/api/v1/ingest", json=doc).is_success
        listed = poll(lambda: [i for i in _incidents(api) if len(i["alerts"]) == 2])
        assert listed, f"the incident did not form:\n{collector.log()}"
        asked = api.post(f"/api/v1/alerts/incidents/{listed[0]['id']}/analysis")
        assert asked.status_code == 202, asked.text
        done = poll(lambda: [i for i in _incidents(api) if "analysis" in i])
        assert done, f"the model's analysis did not come:\n{collector.log()}"
    return collector.url, done[0]


def test_the_playbooks_and_the_models_analysis_shown_as_its_text(
    page: Page, analysed: tuple[str, dict[str, Any]]
) -> None:
    url, incident = analysed
    view = Dashboard(page, url).open("incidents")
    card = view.locator(f'[data-incident="{incident["id"]}"]')
    cordon = card.locator('[data-playbook="cordon"]')
    expect(cordon).to_have_attribute("data-status", "pending")  # destructive: awaits approval
    expect(cordon).to_have_attribute("title", "take the node out of the pool")
    state = cordon.locator('[data-field="action"]')
    expect(state).to_have_text("pending")
    actions = httpx.get(f"{url}/api/v1/actions", timeout=WAIT_S).json()
    assert [a["playbook"] for a in actions] == ["cordon"]  # the trigger's; "drain" suggested only
    expect(state).to_have_attribute(
        "title", re.compile(rf"stepwatch actions show {actions[0]['id']}")
    )
    expect(card.locator('[data-playbook="drain"]')).to_have_count(0)  # not triggered by log_oom

    analysis = card.locator(f'[data-analysis="{MODEL}"]')
    expect(analysis.locator('[data-field="analysis-by"]')).to_contain_text(
        f"Analysis by model {MODEL} · "
    )
    expect(analysis).to_contain_text("model-written")
    text = analysis.locator('[data-field="analysis-text"]')
    expect(text).to_have_count(1)
    assert text.text_content() == incident["analysis"]["text"] == ANSWER
    expect(text.locator("*")).to_have_count(0)  # no <img>, <b> or <script>: text only
    assert page.evaluate("document.body.dataset.pwned") is None
    expect(analysis.locator('[data-suggested="drain"]')).to_have_count(1)
    expect(analysis.locator('[data-field="suggested"]')).to_contain_text("nothing was requested")


def test_asking_the_model_again_brings_its_new_answer(
    page: Page, model: ChatModel, analysed: tuple[str, dict[str, Any]]
) -> None:
    url, incident = analysed
    view = Dashboard(page, url).open("incidents")
    card = view.locator(f'[data-incident="{incident["id"]}"]')
    ask = card.locator('[data-action="ask-model"]')
    expect(ask).to_have_text("Ask the model again")
    with model.arrived:
        model.text = AGAIN
        before = len(model.asked)
    with page.expect_response(lambda r: r.request.method == "POST") as answered:
        ask.click()
    assert answered.value.status == 202
    expect(page.locator("#message")).to_contain_text("Asked the model about the incident")
    assert len(model.wait_for(before + 1)) == before + 1
    # the page reads the incidents again every 10 s: the new analysis replaces the old
    text = card.locator('[data-field="analysis-text"]')
    expect(text).to_contain_text("Asked again:", timeout=WAIT_S * 1000)
    assert text.text_content() == AGAIN
    expect(text.locator("*")).to_have_count(0)
    assert page.evaluate("document.body.dataset.pwned") is None
    expect(card.locator("[data-suggested]")).to_have_count(0)
