"""A collector subprocess for the benchmarks: started on a free loopback port, awaited ready."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["free_port", "start_collector"]


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_collector(
    store: Path, port: int, log: Path, *extra: str, wait_s: float = 60.0
) -> subprocess.Popen[bytes]:
    """``python -m stepwatch.server`` on ``store`` (``extra``: more of its options), once ready.

    Its output goes to ``log``, shown when it does not answer ``/readyz`` within ``wait_s``.
    """
    command = [sys.executable, "-m", "stepwatch.server", "--store", str(store),
               "--port", str(port), *extra]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                conn.close()
                return proc
            conn.close()
        except OSError:
            pass
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise SystemExit(f"collector did not start:\n{log.read_text(errors='replace')}")
