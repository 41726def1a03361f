"""`stepwatch trace`: the JSON a script reads, the tables people read, and mistakes in one line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from stepwatch.cli import main

from ._traces import gpu, op, write_trace
from .test_analysis import STEP


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["trace", *args])
    return result.exit_code, result.output


def test_json_one_object_per_trace(tmp_path: Path) -> None:
    a = write_trace(tmp_path / "a.json", STEP)
    b = write_trace(tmp_path / "b.json", [*STEP, gpu("ampere_sgemm_128x64_nn", 460, 30)])
    code, out = _run(str(a), str(b), "--json")
    assert code == 0, out
    objects = [json.loads(line) for line in out.splitlines()]
    assert [o["kind"] for o in objects] == ["trace", "trace"]  # no ranks: none named
    for obj in objects:
        assert set(obj["breakdown"]) == {"compute", "comm", "memcpy", "idle"}
        assert all(isinstance(v, float) for v in obj["breakdown"].values())
        assert obj["ops"] and obj["kernels"]
        for stat in obj["ops"]:
            assert {"name", "self_us", "calls", "share"} <= set(stat)
        selfs = [s["self_us"] for s in obj["ops"]]
        assert selfs == sorted(selfs, reverse=True)
    assert objects[0]["breakdown"]["compute"] == 200e-6
    assert objects[1]["breakdown"]["compute"] == 230e-6


def test_compare_and_ranks(tmp_path: Path) -> None:
    ranks = [write_trace(tmp_path / f"r{r}.json", [*STEP, op("aten::mm", 0, 10 + r)],
                         distributedInfo={"rank": r, "world_size": 2}) for r in (0, 1)]  # fmt: skip
    code, out = _run(*map(str, ranks), "--json")
    assert code == 0, out
    kinds = [json.loads(line)["kind"] for line in out.splitlines()]
    assert kinds == ["trace", "trace", "ranks"]
    code, out = _run(*map(str, ranks), "--json", "--compare")
    last = json.loads(out.splitlines()[-1])
    assert last["kind"] == "compare" and last["ops"][0]["name"] == "aten::mm"
    code, out = _run(*map(str, ranks), "--compare")
    assert code == 0 and "against" in out and "aten::mm" in out


def test_tables_and_advice(tmp_path: Path) -> None:
    code, out = _run(str(write_trace(tmp_path / "a.json", STEP)))
    assert code == 0, out
    for text in ("compute", "Kernels by time", "ampere_sgemm_128x64_nn", "advice (low_overlap)"):
        assert text in out


def test_mistakes_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X",')
    code, out = _run(str(bad))
    assert code == 1 and "not a Chrome/Kineto trace" in out and "Traceback" not in out
    code, out = _run(str(bad), "--compare")
    assert code == 2 and "two files" in out
