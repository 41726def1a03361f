"""The logs view: a Python traceback arrives as one event and is shown folded to its exception;
opening it shows every line."""

from __future__ import annotations

import time

import httpx
import numpy as np
from playwright.sync_api import expect

from stepwatch.collect import LineGrouper
from stepwatch.model import SampleBatch
from stepwatch.wire import BINARY_CONTENT_TYPE, encode_batch

from .conftest import Dashboard, LiveDemo

TRACEBACK = """\
Traceback (most recent call last):
  File "train.py", line 88, in <module>
    main()
  File "train.py", line 61, in main
    scale = total / seen
ZeroDivisionError: float division by zero
step 412 | loss 3.1""".splitlines()


def _send_log(demo: LiveDemo) -> None:
    """The lines above as the agent's tailer would turn them into events, sent to the demo."""
    grouper = LineGrouper({"run": demo.run_id, "node": "node0"})
    now = time.time()
    events = [e for i, line in enumerate(TRACEBACK) for e in grouper.feed(line, now + i * 0.01)]
    events += grouper.flush()
    empty = np.zeros(0)
    batch = SampleBatch(
        "ui-test-logs", 1, [], empty.astype(np.uint32), empty, empty.astype(np.int64), empty
    )
    batch.events.extend(events)
    ack = httpx.post(
        f"{demo.url}/api/v1/ingest",
        content=encode_batch(batch),
        headers={"Content-Type": BINARY_CONTENT_TYPE},
        timeout=30,
    )
    ack.raise_for_status()


def test_a_traceback_is_folded(dashboard: Dashboard, live_demo: LiveDemo) -> None:
    _send_log(live_demo)
    view = dashboard.open("logs", run=live_demo.run_id, node="node0", q="ZeroDivisionError")
    fold = view.locator("[data-logs] details")
    expect(fold).to_have_count(1)
    expect(fold.locator("summary")).to_contain_text("ZeroDivisionError")
    expect(fold.locator("pre")).not_to_be_visible()

    fold.locator("summary").click()
    expect(fold.locator("pre")).to_be_visible()
    for line in TRACEBACK[:-1]:
        expect(fold.locator("pre")).to_contain_text(line.strip())
    expect(view.locator("[data-logs] [data-row]")).to_have_count(1)  # the search found one event
