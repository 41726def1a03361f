"""The streaming reader gives exactly what json.load gives, in pieces of any size, plain or
gzip, and says what is wrong with a file that is no trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from stepwatch.trace import TraceError, TraceFile

TRACE = {
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "GPU ü"}],
    "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1.5, "dur": 12345678901.25,
         "args": {"s": "a \"quoted\" ]} string", "n": [1, 2, {"x": None}]}},
        {"ph": "i", "name": "é", "ts": 3},
        {"ph": "M", "name": "process_name", "args": {"name": "python"}},
    ],
    "distributedInfo": {"rank": 3, "world_size": 8},
    "traceName": "t",
}  # fmt: skip


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("compress", [False, True])
def test_reads_what_json_load_reads(tmp_path: Path, chunk: int, compress: bool) -> None:
    text = json.dumps(TRACE, indent=2, ensure_ascii=False).encode()
    path = tmp_path / ("t.json.gz" if compress else "t.json")
    path.write_bytes(gzip.compress(text) if compress else text)
    with TraceFile(path, chunk_chars=chunk) as trace:
        events = list(trace.events())
        assert events == TRACE["traceEvents"]
        assert trace.metadata == {k: v for k, v in TRACE.items() if k != "traceEvents"}


def test_array_format_with_trailing_comma_and_no_closing_bracket(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('[{"ph": "X", "ts": 1, "dur": 2},\n {"ph": "X", "ts": 5, "dur": 1},\n')
    with TraceFile(path, chunk_chars=4) as trace:
        assert [e["ts"] for e in trace.events()] == [1, 5]


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("hello", "starts with"),
        ('{"traceEvents": {"a": 1}}', "not an array"),
        ('{"traceEvents": [{"ph": "X", "ts": 1', "malformed"),
        ('{"traceEvents": [{"ph": "X"} {"ph": "X"}]}', "not a Chrome/Kineto trace"),
    ],
)
def test_broken_files_are_refused(tmp_path: Path, text: str, what: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with TraceFile(path) as trace, pytest.raises(TraceError, match=what):
        list(trace.events())


@pytest.mark.parametrize("compress", [False, True])
def test_bytes_are_read_as_the_file_is_and_errors_say_the_name_given(compress: bool) -> None:
    text = json.dumps(TRACE).encode()
    with TraceFile(gzip.compress(text) if compress else text, chunk_chars=7) as trace:
        assert list(trace.events()) == TRACE["traceEvents"]
    broken = b'{"traceEvents": [{"ph": "X"} {"ph": "X"}]}'
    with (
        TraceFile(gzip.compress(broken) if compress else broken, name="r/p1") as trace,
        pytest.raises(TraceError, match=r"^r/p1: not a Chrome/Kineto trace"),
    ):
        list(trace.events())


def test_a_file_object_given_is_left_open(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(TRACE).encode()))
    with path.open("rb") as file:
        with TraceFile(file) as trace:
            assert list(trace.events()) == TRACE["traceEvents"]
        assert not file.closed
