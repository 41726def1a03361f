"""Debian's RabbitMQ for the tests, started on loopback with a data directory, an Erlang port
mapper and a node name of its own, restartable on the same data, stopped by PID."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pika
import pika.exceptions
import pytest
from conftest import READY_TIMEOUT_S, free_port, stop_process

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"


class Broker:
    """One broker node: ``url``, ``start()``, ``stop()`` (graceful), ``kill()``, ``restart()``."""

    def __init__(self, home: Path) -> None:
        if not Path(SERVER).exists() or shutil.which("epmd") is None:
            pytest.fail("rabbitmq-server is not installed: run scripts/system-deps")
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
            "RABBITMQ_NODENAME": f"stepwatch-test-{self.port}@localhost",
            "RABBITMQ_DIST_PORT": str(dist),
            "RABBITMQ_MNESIA_BASE": str(home / "mnesia"),
            "RABBITMQ_LOG_BASE": str(home / "log"),
            "RABBITMQ_CONFIG_FILE": str(home / "rabbitmq"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(home / "rabbitmq.pid"),
        }
        self._epmd: subprocess.Popen[bytes] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._runs = 0

    def start(self) -> Broker:
        """Start the node and return once it takes connections."""
        if self._epmd is None:  # ours, so it is stopped with the broker, not left behind
            self._epmd = subprocess.Popen(
                ["epmd", "-port", str(self._epmd_port)], env=self._env,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        self._runs += 1
        with (self.home / f"broker-{self._runs}.log").open("wb") as out:
            self._proc = subprocess.Popen(
                [SERVER], env=self._env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                pytest.fail(f"rabbitmq-server exited; see {self.home}/broker-{self._runs}.log")
            try:
                pika.BlockingConnection(pika.URLParameters(self.url)).close()
                return self
            except pika.exceptions.AMQPConnectionError:
                time.sleep(0.3)
        pytest.fail(f"rabbitmq-server did not start in {READY_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        """Stop the node gracefully (its data stays for the next start)."""
        if self._proc is not None:
            stop_process(self._proc)
            self._proc = None

    def kill(self) -> None:
        """Kill the node, its Erlang children too."""
        if self._proc is not None:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            self._proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the node and its port mapper."""
        self.stop()
        if self._epmd is not None:
            stop_process(self._epmd)
            self._epmd = None
