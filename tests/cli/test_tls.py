"""The commands that talk to a collector, over TLS: --ca-file (or STEPWATCH_CA_FILE), and
--client-cert/--client-key for mutual TLS; a CA we do not have is one clear error line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from _certs import Certs
from click.testing import CliRunner

import stepwatch
from stepwatch.cli import main
from stepwatch.spool import ClientTls


def _invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    """``stepwatch ARGS`` in this process, with no STEPWATCH_* variable but those in ``env``."""
    cleared = {k: None for k in os.environ if k.startswith("STEPWATCH_")}
    return CliRunner().invoke(main, list(args), env={**cleared, **(env or {})})


def _mutual(collector_factory: Any, certs: Certs) -> Any:
    args = ("--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key))
    known = ClientTls(certs.ca, certs.client_cert, certs.client_key)
    return collector_factory(extra_args=(*args, "--tls-client-ca", str(certs.ca)), tls=known)


def test_a_client_command_trusts_the_ca_given_by_flag_or_environment(
    tls_server: Any, certs: Certs
) -> None:
    by_flag = _invoke("alerts", "--server", tls_server.url, "--ca-file", str(certs.ca))
    assert by_flag.exit_code == 0 and by_flag.output == "0 alerts\n", by_flag.output
    by_env = _invoke(
        "silence", "list", "--server", tls_server.url, env={"STEPWATCH_CA_FILE": str(certs.ca)}
    )
    assert by_env.exit_code == 0, by_env.output
    top = _invoke("top", "--once", "--server", tls_server.url, "--ca-file", str(certs.ca))
    assert top.output == f"Error: {tls_server.url} has no runs yet\n"  # it got an answer


@pytest.mark.parametrize(
    ("ca", "said"),
    [
        (None, "not signed by a CA we trust: pass that CA with --ca-file or STEPWATCH_CA_FILE"),
        ("other_ca", "not signed by a CA we trust"),
    ],
    ids=["system-cas", "another-ca"],
)
def test_a_collector_we_cannot_trust_is_one_error_line_saying_what_to_pass(
    tls_server: Any, certs: Certs, ca: str | None, said: str
) -> None:
    ca_args = ("--ca-file", str(getattr(certs, ca))) if ca else ()
    result = _invoke("audit", "--server", tls_server.url, *ca_args)
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert (
        line.startswith(f"Error: cannot talk to the collector at {tls_server.url}: ")
        and said in line
    )


def test_plain_http_to_an_https_collector_says_to_use_https(tls_server: Any) -> None:
    plain = tls_server.url.replace("https://", "http://")
    result = _invoke("alerts", "--server", plain)
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert line.startswith(f"Error: cannot talk to the collector at {plain}: ") and (
        "if it serves HTTPS, use an https:// URL" in line
    ), line


def test_mutual_tls_needs_the_client_certificate(collector_factory: Any, certs: Certs) -> None:
    collector = _mutual(collector_factory, certs)
    anonymous = _invoke("actions", "list", "--server", collector.url, "--ca-file", str(certs.ca))
    assert anonymous.exit_code == 1
    (line,) = anonymous.output.splitlines()
    assert line.startswith(f"Error: cannot talk to the collector at {collector.url}: "), line
    assert "pass --client-cert and --client-key signed by its --tls-client-ca" in line
    env = {
        "STEPWATCH_CA_FILE": str(certs.ca),
        "STEPWATCH_CLIENT_CERT": str(certs.client_cert),
        "STEPWATCH_CLIENT_KEY": str(certs.client_key),
    }
    known = _invoke("actions", "list", "--server", collector.url, env=env)
    assert known.exit_code == 0 and known.output == "0 actions\n", known.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--ca-file", "{missing}"), "Error: --ca-file {missing}: no such file"),
        (("--ca-file", "{junk}"), "Error: --ca-file {junk}: unusable (no PEM certificate in it)"),
        (("--client-key", "{client_key}"), "Error: a client key needs its certificate"),
        (
            ("--client-cert", "{client_cert}", "--client-key", "{other_client_key}"),
            "unusable (the key is not the certificate's)",
        ),
    ],
    ids=["missing-ca", "not-pem", "key-alone", "wrong-key"],
)
def test_bad_tls_files_are_one_error_line(
    tmp_path: Path, certs: Certs, args: tuple[str, ...], said: str
) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    names = {k: str(v) for k, v in vars(certs).items()}
    names.update(junk=str(junk), missing=str(tmp_path / "missing.pem"))
    result = _invoke(
        "alerts", "--server", "https://127.0.0.1:1", *(a.format(**names) for a in args)
    )
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert line.startswith(said.format(**names)) or said.format(**names) in line, line


def test_sync_over_mutual_tls(collector_factory: Any, certs: Certs, tmp_path: Path) -> None:
    collector = _mutual(collector_factory, certs)
    with stepwatch.init(run_id="r-sync-tls", dir=tmp_path, heartbeat_s=None) as run:
        for step in range(5):
            run.log({"loss": float(step)}, step=step)
    ca = ("--ca-file", str(certs.ca))
    refused = _invoke("sync", str(tmp_path), "--server", collector.url, *ca, "--timeout", "1")
    assert refused.exit_code == 1, refused.output
    (line,) = refused.output.splitlines()
    assert line.startswith(
        "Error: sent 0 batches (0 samples) of 1 run; 1 batch left: "
        f"cannot talk to server {collector.url} after "
    ), line
    assert "pass --client-cert and --client-key" in line
    mine = ("--client-cert", str(certs.client_cert), "--client-key", str(certs.client_key))
    done = _invoke("sync", str(tmp_path), "--server", collector.url, *ca, *mine)
    assert done.exit_code == 0, done.output
    assert "(5 samples) of 1 run; nothing left to send" in done.output


def test_the_agent_ships_to_an_https_collector(
    tls_server: Any, certs: Certs, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    command = [sys.executable, "-m", "stepwatch.cli", "agent", "--dir", str(tmp_path / "spool")]
    tls = ("--server", tls_server.url, "--ca-file", str(certs.ca))
    with subprocess.Popen(
        [*command, "--node", "n-tls", "--interval", "0.2", "--gpu", "none", *tls],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as proc:
        try:
            deadline = time.monotonic() + 30
            verify = tls_server.tls.context()
            while not httpx.get(f"{tls_server.url}/api/v1/series", verify=verify).json():
                assert time.monotonic() < deadline and proc.poll() is None, "nothing arrived"
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    series = httpx.get(f"{tls_server.url}/api/v1/series", verify=verify).json()
    assert {s["labels"]["node"] for s in series} == {"n-tls"}
