"""A real shipper: Debian's rsyslog follows a file (imfile) and ships it with omelasticsearch,
unchanged, to the collector's _bulk API; the lines come back from the log search."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

RSYSLOGD = "/usr/sbin/rsyslogd"

CONFIG = """\
global(workDirectory="{work}")
module(load="imfile")
module(load="omelasticsearch")
template(name="doc" type="list" option.jsonf="on") {{
  property(outname="@timestamp" name="timereported" dateFormat="rfc3339" format="jsonf")
  property(outname="message" name="msg" format="jsonf")
  property(outname="host.name" name="hostname" format="jsonf")
  constant(outname="run" value="{run}" format="jsonf")
}}
input(type="imfile" file="{followed}" tag="train:" freshStartTail="off")
action(type="omelasticsearch" server="127.0.0.1" serverport="{port}" searchIndex="train-logs"
       template="doc" bulkmode="on" uid="rsyslog" pwd="{token}"
       action.resumeRetryCount="-1" action.resumeInterval="1")
"""


def test_rsyslog_ships_a_followed_file_that_becomes_searchable(
    collector_factory: Any, processes: Any, tmp_path: Path, eventually: Any
) -> None:
    if shutil.which(RSYSLOGD) is None:
        pytest.fail("rsyslogd is not installed: run scripts/system-deps")
    collector = collector_factory(auth=True)
    run = f"rsyslog-{uuid.uuid4().hex[:6]}"
    created = httpx.post(f"{collector.url}/api/v1/runs", json={"id": run, "project": "default"},
                         headers=collector.headers)  # fmt: skip
    assert created.status_code == 200, created.text
    followed = tmp_path / "train.log"
    followed.write_text("step 1 loss=2.5\n")
    work = tmp_path / "rsyslog"
    work.mkdir()
    config = tmp_path / "rsyslog.conf"
    token = collector.tokens["ingest", "default"]
    config.write_text(
        CONFIG.format(work=work, run=run, followed=followed, port=collector.port, token=token)
    )
    pidfile = tmp_path / "rsyslogd.pid"
    processes.start([RSYSLOGD, "-n", "-f", str(config), "-i", str(pidfile)], tmp_path / "rs.log")
    with followed.open("a") as out:
        out.write("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
        out.write("step 2 loss=2.4\n")

    query = {"query": {"bool": {"must": [{"match": {"message": "CUDA out of memory"}}]}},
             "run": run, "context": 2}  # fmt: skip

    def search() -> list[Any]:
        answer = httpx.post(f"{collector.url}/api/v1/logs/search", json=query,
                            headers=collector.headers_of("viewer"), timeout=10)  # fmt: skip
        assert answer.status_code == 200, answer.text
        return list(answer.json()["hits"])

    hits = eventually(search, timeout_s=30)
    assert hits, f"nothing arrived; rsyslog said:\n{(tmp_path / 'rs.log').read_text()}"
    (hit,) = hits
    assert hit["text"].endswith("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert hit["data"]["index"] == "train-logs" and hit["labels"]["node"]
    assert [e["text"] for e in hit["before"]] == ["step 1 loss=2.5"]
    assert [e["text"] for e in eventually(lambda: search()[0]["after"])] == ["step 2 loss=2.4"]
