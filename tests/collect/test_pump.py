"""A child's output: echoed byte for byte, turned into log events, never blocking the child."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time

from stepwatch.collect._pump import OutputPump
from stepwatch.model import Event

JOIN_TIMEOUT_S = 30.0

CHILD = r"""
import sys
for i in range(3000):
    print(f"step {i} loss {1.0 / (i + 1):.6f}")
sys.stdout.flush()
print("WARNING: stderr works too", file=sys.stderr, flush=True)
def load():
    raise FileNotFoundError("checkpoint-300 missing")
try:
    load()
except OSError as exc:
    raise RuntimeError("resume failed") from exc
"""


class Events:
    """Collects events from the pump's thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[Event] = []

    def __call__(self, event: Event) -> None:
        with self.lock:
            self.items.append(event)

    def of(self, stream: str) -> list[Event]:
        with self.lock:
            return [e for e in self.items if e.labels["stream"] == stream]


def spawn(code: str, **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs
    )


def test_a_child_that_prints_and_raises() -> None:
    proc = spawn(CHILD)
    assert proc.stdout is not None and proc.stderr is not None
    out, err, events = io.BytesIO(), io.BytesIO(), Events()
    labels = {"run": "r1"}
    pumps = [
        OutputPump(proc.stdout, stream="stdout", on_event=events, echo=out, labels=labels).start(),
        OutputPump(proc.stderr, stream="stderr", on_event=events, echo=err, labels=labels).start(),
    ]
    assert proc.wait(timeout=JOIN_TIMEOUT_S) == 1
    assert all(pump.join(JOIN_TIMEOUT_S) for pump in pumps)

    expected = "".join(f"step {i} loss {1.0 / (i + 1):.6f}\n" for i in range(3000))
    assert out.getvalue() == expected.encode()
    assert [e.text for e in events.of("stdout")] == expected.splitlines()
    assert all(e.labels == {"run": "r1", "stream": "stdout"} for e in events.of("stdout"))

    warning, traceback = events.of("stderr")
    assert err.getvalue().decode().splitlines() == [warning.text, *traceback.text.splitlines()]
    assert warning.data == {"level": "warning"}
    assert traceback.data["traceback"] is True and traceback.data["exception"] == "RuntimeError"
    assert "FileNotFoundError: checkpoint-300 missing" in traceback.text
    assert traceback.labels == {"run": "r1", "stream": "stderr"}
    assert not any(t.name.startswith("stepwatch-pump") for t in threading.enumerate())


def test_a_slow_callback_never_blocks_the_child() -> None:
    proc = spawn("import sys; sys.stdout.write(('y' * 1023 + '\\n') * 2048)")
    assert proc.stdout is not None and proc.stderr is not None
    release, events = threading.Event(), Events()

    def stuck(event: Event) -> None:
        release.wait()
        events(event)

    pumps = [
        OutputPump(proc.stdout, stream="stdout", on_event=stuck).start(),
        OutputPump(proc.stderr, stream="stderr", on_event=stuck).start(),
    ]
    try:
        assert proc.wait(timeout=JOIN_TIMEOUT_S) == 0  # 2 MiB went through a 64 KiB pipe
    finally:
        release.set()
    assert all(pump.join(JOIN_TIMEOUT_S) for pump in pumps)
    assert len(events.of("stdout")) == 2048 and pumps[0].dropped == 0


def test_events_beyond_the_backlog_are_dropped_and_counted() -> None:
    proc = spawn("for i in range(1000): print(i)")
    assert proc.stdout is not None and proc.stderr is not None
    release, events = threading.Event(), Events()

    def stuck(event: Event) -> None:
        release.wait()
        events(event)

    pump = OutputPump(proc.stdout, stream="stdout", on_event=stuck, max_pending=10).start()
    proc.stderr.close()
    try:
        assert proc.wait(timeout=JOIN_TIMEOUT_S) == 0
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while pump.dropped < 989 and time.monotonic() < deadline:
            time.sleep(0.01)  # one event in the callback, ten waiting, the rest dropped
    finally:
        release.set()
    assert pump.join(JOIN_TIMEOUT_S)
    delivered = [int(e.text) for e in events.of("stdout")]
    assert pump.dropped >= 989 and len(delivered) + pump.dropped == 1000
    assert delivered == sorted(delivered)


def test_a_quiet_traceback_is_delivered_before_the_pipe_closes() -> None:
    code = (
        "import sys\n"
        "print('Traceback (most recent call last):', file=sys.stderr)\n"
        "print('  File \"train.py\", line 9, in step', file=sys.stderr, flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = spawn(code, stdin=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    arrived, events = threading.Event(), Events()

    def on_event(event: Event) -> None:
        events(event)
        arrived.set()

    pumps = [
        OutputPump(proc.stdout, stream="stdout", on_event=on_event, quiet_s=0.2).start(),
        OutputPump(proc.stderr, stream="stderr", on_event=on_event, quiet_s=0.2).start(),
    ]
    try:
        assert arrived.wait(JOIN_TIMEOUT_S)
        assert proc.poll() is None  # still running: the quiet period, not the end, released it
    finally:
        proc.stdin.close()
        proc.wait(timeout=JOIN_TIMEOUT_S)
    assert all(pump.join(JOIN_TIMEOUT_S) for pump in pumps)
    (event,) = events.of("stderr")
    assert event.data["incomplete"] is True and event.data["lines"] == 2


class BrokenTerminal:
    """An echo stream whose reader went away."""

    def write(self, data: bytes) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise AssertionError("flush after a failed write")


def test_a_broken_echo_or_callback_does_not_stop_the_draining() -> None:
    proc = spawn("for i in range(500): print(i)")
    assert proc.stdout is not None and proc.stderr is not None
    proc.stderr.close()
    events = Events()

    def flaky(event: Event) -> None:
        if int(event.text) % 2:
            raise ValueError("callback failed")
        events(event)

    echo = BrokenTerminal()
    pump = OutputPump(proc.stdout, stream="stdout", on_event=flaky, echo=echo).start()  # type: ignore[arg-type]
    assert proc.wait(timeout=JOIN_TIMEOUT_S) == 0
    assert pump.join(JOIN_TIMEOUT_S)
    assert [int(e.text) for e in events.of("stdout")] == list(range(0, 500, 2))


def test_the_last_line_without_a_newline_is_kept() -> None:
    proc = spawn("import sys; sys.stdout.write('line 1\\nno newline at the end')")
    assert proc.stdout is not None and proc.stderr is not None
    proc.stderr.close()
    events = Events()
    pump = OutputPump(proc.stdout, stream="stdout", on_event=events).start()
    assert proc.wait(timeout=JOIN_TIMEOUT_S) == 0
    assert pump.join(JOIN_TIMEOUT_S)
    assert [e.text for e in events.of("stdout")] == ["line 1", "no newline at the end"]
