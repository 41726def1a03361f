"""Lines into log events: tracebacks grouped whole, levels read, ranks labelled, sizes capped."""

from __future__ import annotations

import traceback

import pytest

from stepwatch.collect._lines import LineBuffer, LineGrouper, clean_line, detect_level
from stepwatch.model import Event


def feed_all(grouper: LineGrouper, lines: list[str], ts: float = 100.0) -> list[Event]:
    """Feed every line at ``ts`` and flush: all the events the lines make."""
    events = [e for line in lines for e in grouper.feed(line, ts)]
    return events + grouper.flush()


def formatted(exc: BaseException) -> list[str]:
    """The traceback lines this Python prints for ``exc``."""
    return "".join(traceback.format_exception(exc)).splitlines()


def raised(fn: object) -> BaseException:
    assert callable(fn)
    try:
        fn()
    except BaseException as exc:
        return exc
    raise AssertionError("expected an exception")


def simple() -> None:
    raise ValueError("bad value")


def chained_context() -> None:
    try:
        {}["missing"]
    except KeyError:
        simple()


def chained_cause() -> None:
    try:
        chained_context()
    except ValueError as exc:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB") from exc


def group() -> None:
    raise ExceptionGroup("workers failed", [ValueError("a"), TypeError("b")])


@pytest.mark.parametrize(
    ("fn", "name"),
    [
        (simple, "ValueError"),
        (chained_context, "ValueError"),
        (chained_cause, "RuntimeError"),
        (group, "ExceptionGroup"),
    ],
)
def test_a_traceback_is_one_event_between_ordinary_lines(fn: object, name: str) -> None:
    tb = formatted(raised(fn))
    events = feed_all(LineGrouper({"path": "x.log"}), ["step 1", *tb, "step 2"])
    assert [e.text for e in events] == ["step 1", "\n".join(tb), "step 2"]
    assert events[1].data == {
        "traceback": True,
        "exception": name,
        "lines": len(tb),
        "level": "error",
    }
    assert all(e.kind == "log" and e.labels == {"path": "x.log"} for e in events)


def test_chained_sections_stay_together() -> None:
    tb = formatted(raised(chained_cause))
    during = "During handling of the above exception, another exception occurred:"
    cause = "The above exception was the direct cause of the following exception:"
    assert tb.count(during) == 1 and tb.count(cause) == 1
    (event,) = feed_all(LineGrouper(), tb)
    assert during in event.text and cause in event.text
    assert event.text.count("Traceback (most recent call last):") == 3


def test_a_finished_traceback_waits_for_the_next_line_or_quiet() -> None:
    grouper = LineGrouper(quiet_s=5.0)
    tb = formatted(raised(simple))
    assert [e for line in tb for e in grouper.feed(line, 10.0)] == []
    assert grouper.poll(14.0) == []
    (event,) = grouper.poll(15.0)
    assert event.ts == 10.0 and event.data["exception"] == "ValueError"
    assert grouper.flush() == []


def test_the_line_after_a_traceback_releases_it() -> None:
    grouper = LineGrouper()
    tb = formatted(raised(simple))
    assert [e for line in tb for e in grouper.feed(line, 1.0)] == []
    released = grouper.feed("epoch 2", 2.0)
    assert [e.text for e in released] == ["\n".join(tb), "epoch 2"]


def test_blank_lines_after_a_traceback_are_not_part_of_it() -> None:
    tb = formatted(raised(simple))
    events = feed_all(LineGrouper(), [*tb, "", "", "next"])
    assert [e.text for e in events] == ["\n".join(tb), "next"]


def test_a_traceback_cut_short_is_flushed_as_incomplete() -> None:
    tb = formatted(raised(simple))[:-1]
    (event,) = feed_all(LineGrouper(), tb)
    assert event.text == "\n".join(tb)
    assert event.data["incomplete"] is True and "exception" not in event.data


def test_a_new_traceback_ends_one_cut_short() -> None:
    first = formatted(raised(simple))[:2]
    second = formatted(raised(chained_cause))
    events = feed_all(LineGrouper(), [*first, *second])
    assert [e.text for e in events] == ["\n".join(first), "\n".join(second)]
    assert [e.data.get("exception") for e in events] == [None, "RuntimeError"]


def test_interleaved_ranks_are_grouped_per_rank() -> None:
    tb0 = formatted(raised(simple))
    tb1 = formatted(raised(chained_cause))
    lines = []
    for i in range(max(len(tb0), len(tb1))):
        lines += [f"[rank0]: {tb0[i]}"] if i < len(tb0) else []
        lines += [f"[default1]:{tb1[i]}"] if i < len(tb1) else []
    events = feed_all(LineGrouper({"stream": "stderr"}), [*lines, "[rank1]:done"])
    by_rank = {e.labels["rank"]: e for e in events if e.data.get("traceback")}
    assert by_rank["0"].text == "\n".join(tb0) and by_rank["0"].data["exception"] == "ValueError"
    assert by_rank["1"].text == "\n".join(tb1) and by_rank["1"].data["exception"] == "RuntimeError"
    assert by_rank["0"].labels == {"stream": "stderr", "rank": "0"}
    assert [(e.text, e.labels["rank"]) for e in events[1:2]] == [("done", "1")]
    assert [e.labels["rank"] for e in events] == ["1", "1", "0"]  # rank 0's waited for flush


@pytest.mark.parametrize(
    ("line", "rank", "text"),
    [
        ("[rank3]: step 5", "3", "step 5"),
        ("[default3]:step 5", "3", "step 5"),
        ("[trainer12]:  File x.py", "12", "  File x.py"),
        ("[7]:hello", "7", "hello"),
        ("[default0]:[rank5]: boom", "5", "boom"),
        ("[W socket.cpp:663] retry", None, "[W socket.cpp:663] retry"),
        (
            "[rank 3] spaced is not a launcher prefix",
            None,
            "[rank 3] spaced is not a launcher prefix",
        ),
    ],
)
def test_launcher_rank_prefixes(line: str, rank: str | None, text: str) -> None:
    (event,) = feed_all(LineGrouper({"stream": "stdout"}), [line])
    assert event.text == text
    assert event.labels.get("rank") == rank and event.labels["stream"] == "stdout"


@pytest.mark.parametrize(
    ("line", "level"),
    [
        ("ERROR:root:checkpoint save failed", "error"),
        ("WARNING:torch.distributed:slow rendezvous", "warning"),
        ("INFO:__main__:step 10", "info"),
        ("DEBUG:urllib3:connection", "debug"),
        ("CRITICAL:root:dead", "error"),
        ("2024-05-01 12:00:00,123 - trainer - ERROR - NCCL timeout", "error"),
        ("2024-05-01 12:00:00.000 | WARNING  | train:step:42 - lr too high", "warning"),
        ("[2024-05-01 12:00:00] [INFO] epoch 3", "info"),
        ("node1:123:456 [0] NCCL WARN Call to ibv_reg_mr failed", "warning"),
        ("[W socket.cpp:663] [c10d] The client socket has failed to connect", "warning"),
        (
            "[W1108 12:34:56.789012345 ProcessGroupNCCL.cpp:1168] Warning: WorkNCCL timeout",
            "warning",
        ),
        ("[E ProcessGroupNCCL.cpp:475] Watchdog caught collective operation timeout", "error"),
        ("E1108 12:00:00.123456  4242 client.cc:12] RPC failed", "error"),
        ("I1108 12:00:00.123456  4242 server.cc:9] listening", "info"),
        ('{"ts": 1, "level": "warning", "msg": "x"}', "warning"),
        ("ts=1 level=error msg=boom", "error"),
        ("/opt/train.py:12: UserWarning: TypedStorage is deprecated", "warning"),
        ("/opt/m.py:3: torch.jit.TracerWarning: converting a tensor", "warning"),
        ("torch.OutOfMemoryError: CUDA out of memory.", "error"),
        ("RuntimeError: NCCL communicator was aborted", "error"),
        ("Error: disk quota exceeded", "error"),
        ("Traceback (most recent call last):", "error"),
        ("step 100 loss 2.31", None),
        ("no errors so far, information follows", None),
        ("100%|##########| 10/10 [00:01<00:00]", None),
        ("logging.INFO is the default", None),
    ],
)
def test_level_detection(line: str, level: str | None) -> None:
    assert detect_level(line) == level


def test_ordinary_lines_carry_their_level_or_none() -> None:
    events = feed_all(LineGrouper(), ["WARNING: low disk", "step 3"])
    assert [e.data for e in events] == [{"level": "warning"}, {}]


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (
            b"\r  0%|          | 0/10\r 50%|#####     | 5/10\r100%|##########| 10/10\n",
            "100%|##########| 10/10",
        ),
        (b"epoch 1\r", "epoch 1"),
        (b"bad \xff\xfe bytes \xe2\x82", "bad \ufffd\ufffd bytes \ufffd"),
        (b"\x1b[31mERROR\x1b[0m boom\r\n", "ERROR boom"),
        (b"\x00\x00\x00resumed", "resumed"),
        ("   indented stays   ", "   indented stays"),
    ],
)
def test_clean_line(raw: bytes | str, text: str) -> None:
    assert clean_line(raw) == text


def test_bytes_are_decoded_with_replacement() -> None:
    (event,) = feed_all(LineGrouper(), [b"loss \xff nan"])  # type: ignore[list-item]
    assert event.text == "loss \ufffd nan"


def test_a_huge_traceback_keeps_head_and_tail() -> None:
    frames = [f'  File "deep.py", line {i}, in f{i}' for i in range(10_000)]
    tb = ["Traceback (most recent call last):", *frames, "RecursionError: maximum depth"]
    (event,) = feed_all(LineGrouper(max_lines=100), tb)
    kept = event.text.split("\n")
    omitted = len(tb) - 100
    assert len(kept) == 101
    assert kept[0] == tb[0] and kept[-1] == tb[-1]
    assert kept[:25] == tb[:25] and kept[26:] == tb[-75:]
    assert kept[25] == f"... [{omitted} lines omitted] ..."
    assert event.data["lines"] == len(tb) and event.data["omitted"] == omitted
    assert event.data["exception"] == "RecursionError"


def test_a_huge_line_is_cut() -> None:
    (event,) = feed_all(LineGrouper(max_line_chars=100), ["x" * 1000])
    assert event.text == "x" * 100 + " ...[900 chars cut]"


def test_line_buffer_joins_chunks_and_keeps_the_unfinished_line() -> None:
    buf = LineBuffer()
    assert buf.push(b"a\nb") == [b"a"]
    assert buf.push(b"c\n\nd") == [b"bc", b""]
    assert buf.rest() == b"d"
    assert buf.rest() is None


def test_line_buffer_cuts_a_line_too_long() -> None:
    buf = LineBuffer(max_line_bytes=10)
    assert buf.push(b"0123456789abc") == []
    assert buf.push(b"def\nnext\n") == [b"0123456789 ...[6 bytes cut]", b"next"]


def test_line_buffer_keeps_the_latest_drawing_of_an_endless_progress_bar() -> None:
    buf = LineBuffer(max_line_bytes=64)
    for i in range(1000):
        assert buf.push(f"\r{i:4d}/1000 [{'#' * (i // 100)}]".encode()) == []
    (line,) = buf.push(b"\n")
    assert clean_line(line) == " 999/1000 [#########]"
