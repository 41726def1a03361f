"""Debian's RabbitMQ for the benchmarks: one node on loopback with a data directory, an Erlang
port mapper and a node name of its own, stopped by PID (its port mapper too)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pika
import pika.exceptions
import psutil
from _collector import free_port

__all__ = ["Broker"]

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"


class Broker:
    """One broker node in ``home``: ``url``, ``start()``, ``close()``; the CPU it used and its
    data directory's size."""

    def __init__(self, home: Path) -> None:
        if not Path(SERVER).exists() or shutil.which("epmd") is None:
            raise SystemExit("rabbitmq-server is not installed: run scripts/system-deps")
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.port, dist, self._epmd_port = free_port(), free_port(), free_port()
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"
        (home / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self.port}\nloopback_users = none\n"
            "log.console = true\nlog.file = false\n"
        )
        (home / "enabled_plugins").write_text("[].\n")
        self._env = {
            **os.environ,
            "HOME": str(home),  # the Erlang cookie
            "ERL_EPMD_PORT": str(self._epmd_port),
            "RABBITMQ_NODENAME": f"stepwatch-bench-{self.port}@localhost",
            "RABBITMQ_DIST_PORT": str(dist),
            "RABBITMQ_MNESIA_BASE": str(home / "mnesia"),
            "RABBITMQ_LOG_BASE": str(home / "log"),
            "RABBITMQ_CONFIG_FILE": str(home / "rabbitmq"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(home / "rabbitmq.pid"),
        }
        self._epmd: subprocess.Popen[bytes] | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, wait_s: float = 120.0) -> Broker:
        """Start the node and return once it takes connections."""
        self._epmd = subprocess.Popen(
            ["epmd", "-port", str(self._epmd_port)], env=self._env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        with (self.home / "broker.log").open("wb") as out:
            self._proc = subprocess.Popen(
                [SERVER], env=self._env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self.close()
                raise SystemExit(f"rabbitmq-server exited; see {self.home}/broker.log")
            try:
                pika.BlockingConnection(pika.URLParameters(self.url)).close()
                return self
            except pika.exceptions.AMQPConnectionError:
                time.sleep(0.3)
        self.close()
        raise SystemExit(f"rabbitmq-server did not start in {wait_s:.0f} s")

    def cpu_s(self) -> float:
        """CPU seconds the node (the Erlang VM and its helpers) has used so far."""
        if self._proc is None:
            return 0.0
        total = 0.0
        try:
            root = psutil.Process(self._proc.pid)
            for proc in [root, *root.children(recursive=True)]:
                try:
                    used = proc.cpu_times()
                    total += used.user + used.system
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        return total

    def disk_bytes(self) -> int:
        """Bytes of the node's data directory (the streams' segments among them)."""
        return sum(p.stat().st_size for p in (self.home / "mnesia").rglob("*") if p.is_file())

    def close(self) -> None:
        """Stop the node (SIGTERM to its process group, SIGKILL if it lingers) and its mapper."""
        if self._proc is not None:
            if self._proc.poll() is None:
                os.killpg(self._proc.pid, signal.SIGTERM)
                try:
                    self._proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(self._proc.pid, signal.SIGKILL)
                    self._proc.wait()
            self._proc = None
        if self._epmd is not None:
            self._epmd.terminate()
            try:
                self._epmd.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._epmd.kill()
                self._epmd.wait()
            self._epmd = None
