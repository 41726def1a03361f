"""The collector over TLS: HTTPS with its certificate, mutual TLS with a client CA, and bad
certificate files refused in one line before anything opens."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from _certs import Certs

from stepwatch.server import CollectorOptions, ServerThread, ServerTls
from stepwatch.spool import ClientTls, HttpClient, TransportError
from stepwatch.wire import BINARY_CONTENT_TYPE, encode_batch

from .conftest import make_batch


def test_the_collector_serves_https_to_a_client_trusting_its_ca(tls_server: Any) -> None:
    assert tls_server.url.startswith("https://127.0.0.1:")
    trusting = ClientTls(ca_file=tls_server.tls.ca_file)
    body = encode_batch(make_batch(n=10))
    headers = {"Content-Type": BINARY_CONTENT_TYPE}
    ack = httpx.post(
        f"{tls_server.url}/api/v1/ingest", content=body, headers=headers, verify=trusting.context()
    )
    assert ack.json()["applied"] is True
    assert f"listening on {tls_server.url}" in tls_server.log()
    plain = tls_server.url.replace("https://", "http://")
    with pytest.raises(httpx.TransportError):  # no plain HTTP on a TLS port
        httpx.get(f"{plain}/readyz", timeout=5)


def test_a_client_trusting_another_ca_is_refused(tls_server: Any, certs: Certs) -> None:
    client = HttpClient(tls_server.url, tls=ClientTls(ca_file=certs.other_ca))
    with pytest.raises(TransportError, match="CERTIFICATE_VERIFY_FAILED"):
        client.get("/readyz")
    system = HttpClient(tls_server.url)  # the system's CAs know nothing of the test CA either
    with pytest.raises(TransportError, match="CERTIFICATE_VERIFY_FAILED"):
        system.get("/readyz")


def _mutual(tmp_path: Path, certs: Certs) -> ServerThread:
    tls = ServerTls(certs.server_cert, certs.server_key, client_ca=certs.ca)
    return ServerThread(tmp_path / "s.duckdb", CollectorOptions(port=0, tls=tls))


def test_mutual_tls_refuses_a_client_without_a_trusted_certificate(
    tmp_path: Path, certs: Certs
) -> None:
    with _mutual(tmp_path, certs) as server:
        assert server.url.startswith("https://")
        anonymous = HttpClient(server.url, tls=ClientTls(ca_file=certs.ca))
        with pytest.raises(TransportError):
            anonymous.get("/readyz")
        stranger = ClientTls(certs.ca, certs.other_client_cert, certs.other_client_key)
        with pytest.raises(TransportError):
            HttpClient(server.url, tls=stranger).get("/readyz")
        known = HttpClient(server.url, tls=ClientTls(certs.ca, certs.client_cert, certs.client_key))
        assert known.get("/readyz").status == 200
        known.close()


def _serve(tmp_path: Path, *tls_args: str) -> subprocess.CompletedProcess[str]:
    """``stepwatch server`` as a user runs it, with these --tls-* options."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    store = tmp_path / "never.duckdb"
    args = ["server", "--store", str(store), "--port", "0", *tls_args]
    return subprocess.run(
        [sys.executable, "-m", "stepwatch.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("tls_args", "said"),
    [
        (("--tls-cert", "{server_cert}"), "--tls-cert and --tls-key go together"),
        (("--tls-client-ca", "{ca}"), "--tls-client-ca needs --tls-cert and --tls-key"),
        (
            ("--tls-cert", "{server_cert}", "--tls-key", "{missing}"),
            "with key {missing}: no such file {missing}",
        ),
        (
            ("--tls-cert", "{server_cert}", "--tls-key", "{client_key}"),
            "unusable (the key is not the certificate's)",
        ),
        (
            ("--tls-cert", "{junk}", "--tls-key", "{server_key}"),
            "unusable (not PEM, or the key is not the certificate's)",
        ),
        (
            (
                "--tls-cert",
                "{server_cert}",
                "--tls-key",
                "{server_key}",
                "--tls-client-ca",
                "{junk}",
            ),
            "--tls-client-ca {junk}: unusable (no PEM certificate in it)",
        ),
    ],
    ids=["cert-alone", "client-ca-alone", "missing-key", "wrong-key", "not-pem", "bad-client-ca"],
)
def test_bad_certificate_files_are_one_error_line_and_nothing_is_created(
    tmp_path: Path, certs: Certs, tls_args: tuple[str, ...], said: str
) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    names = {k: str(v) for k, v in vars(certs).items()}
    names.update(junk=str(junk), missing=str(tmp_path / "missing.key"))
    done = _serve(tmp_path, *(arg.format(**names) for arg in tls_args))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("Error: ") and said.format(**names) in line, line
    assert not (tmp_path / "never.duckdb").exists()
