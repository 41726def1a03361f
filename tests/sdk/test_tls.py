"""The SDK to a collector over TLS: a training script whose samples land through HTTPS (and
mutual TLS), and a wrong CA refused with every batch kept in the spool."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from _certs import Certs

import stepwatch
from stepwatch.spool import ClientTls, Spool, sync

TRAINER = textwrap.dedent(
    """
    import sys
    import stepwatch
    run = stepwatch.init(project="tls", run_id="r-tls", dir=sys.argv[1], flush_interval_s=0.05)
    for step in range(20):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    run.finish()
    """
)


def losses(collector: Any, run_id: str) -> list[float]:
    """The values of ``train.loss`` of ``run_id``, read back over TLS."""
    verify = collector.tls.context()
    with httpx.Client(base_url=collector.url, timeout=10, verify=verify) as client:
        params = {"name": "train.loss", "run": run_id}
        (series,) = client.get("/api/v1/series", params=params).json()
        raw = client.get("/api/v1/query/raw", params={"series": series["id"]}).json()
    return [float(v) for v in raw["value"]]


def _train(collector: Any, spool: Path, **tls_env: str) -> None:
    """Run the training script as a user would, configured by the environment alone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWATCH_")}
    env.update(STEPWATCH_SERVER=collector.url, **tls_env)
    done = subprocess.run(
        [sys.executable, "-c", TRAINER, str(spool)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_a_training_script_ships_to_an_https_collector_given_its_ca(
    tls_server: Any, certs: Certs, tmp_path: Path
) -> None:
    _train(tls_server, tmp_path / "spool", STEPWATCH_CA_FILE=str(certs.ca))
    assert losses(tls_server, "r-tls") == [1.0 / (s + 1) for s in range(20)]


def test_mutual_tls_takes_the_client_certificate_from_the_environment(
    collector_factory: Any, certs: Certs, tmp_path: Path
) -> None:
    args = ("--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key))
    known = ClientTls(certs.ca, certs.client_cert, certs.client_key)
    collector = collector_factory(extra_args=(*args, "--tls-client-ca", str(certs.ca)), tls=known)
    _train(
        collector,
        tmp_path / "spool",
        STEPWATCH_CA_FILE=str(certs.ca),
        STEPWATCH_CLIENT_CERT=str(certs.client_cert),
        STEPWATCH_CLIENT_KEY=str(certs.client_key),
    )
    assert losses(collector, "r-tls") == [1.0 / (s + 1) for s in range(20)]


def test_a_wrong_ca_is_refused_and_the_spool_keeps_every_batch(
    tls_server: Any, certs: Certs, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"STEPWATCH_CA_FILE": str(certs.other_ca)}
    with caplog.at_level(logging.WARNING, logger="stepwatch.spool"):
        run = stepwatch.Run(server=tls_server.url, dir=tmp_path, run_id="r-wrong-ca", environ=env)
        for step in range(10):
            run.log({"loss": float(step)}, step=step)
        run.finish(timeout_s=1.0)
    assert "CERTIFICATE_VERIFY_FAILED" in caplog.text
    with Spool(run.spool_dir) as spool:
        assert spool.pending()
    verify = tls_server.tls.context()
    runs = httpx.get(f"{tls_server.url}/api/v1/runs", verify=verify).json()
    assert "r-wrong-ca" not in [r["id"] for r in runs]
    result = sync(tmp_path, tls_server.url, tls=ClientTls(ca_file=certs.ca))
    assert (result.unsent, result.rejected) == (0, 0)
    assert losses(tls_server, "r-wrong-ca") == [float(s) for s in range(10)]
