"""The spool lock: held while its holder lives, free the moment it dies (kill -9 too)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from stepwatch.spool import LOCK_FILE, Spool, SpoolLock, has_unsent
from stepwatch.wire import encode

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from stepwatch.spool import SpoolLock
    lock = SpoolLock.take(Path(sys.argv[1]))
    print("held" if lock else "busy", flush=True)
    time.sleep(3600)
    """
)


def test_one_holder_at_a_time_in_one_process(tmp_path: Path) -> None:
    with SpoolLock.take(tmp_path) as first:
        assert first is not None
        assert SpoolLock.take(tmp_path) is None
    again = SpoolLock.take(tmp_path)
    assert again is not None
    again.release()
    again.release()  # twice is fine


def test_a_lock_held_by_another_process_is_free_once_it_is_killed(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert (tmp_path / LOCK_FILE).read_text() == f"{holder.pid}\n"
        assert SpoolLock.take(tmp_path) is None
    finally:
        holder.kill()
        holder.communicate()
    taken = SpoolLock.take(tmp_path)
    assert taken is not None
    taken.release()


def _batch(seq: int) -> bytes:
    one = np.ones(1)
    key = ("train.loss", {"run": "r"})
    return encode("src", seq, [key], one, one, np.zeros(1, np.int64), np.zeros(1, np.uint32))


def test_unsent_records_are_told_from_names_and_sizes(tmp_path: Path) -> None:
    assert not has_unsent(tmp_path)  # nothing written
    with Spool(tmp_path, segment_bytes=64) as spool:
        for seq in range(3):
            spool.append(_batch(seq))
        assert has_unsent(tmp_path)
        positions = [pos for pos, _ in spool.records()]
        spool.ack(positions[0])
        assert has_unsent(tmp_path)
        spool.ack(positions[-1])
    assert not has_unsent(tmp_path)
    assert not has_unsent(tmp_path / "gone")
