"""The broker transport keeps the data when the broker is away, and never says its password."""

from __future__ import annotations

import json

import pytest
from conftest import free_port

from stepwatch.spool import TransportError, open_transport
from stepwatch.spool._broker import BrokerClient
from stepwatch.wire import BINARY_CONTENT_TYPE


def test_an_unreachable_broker_is_a_transport_error_without_the_password() -> None:
    client = open_transport(f"amqp://stepwatch:s3cret@127.0.0.1:{free_port()}/%2F", "sw_tok")
    assert isinstance(client, BrokerClient)
    record = json.dumps({"id": "r1", "project": "p"}).encode()
    with pytest.raises(TransportError) as caught:
        client.post("/api/v1/runs", record, "application/json")
    assert "s3cret" not in str(caught.value) and "sw_tok" not in str(caught.value)
    assert "s3cret" not in client.url
    client.close()


def test_a_body_that_cannot_be_keyed_is_refused_as_malformed() -> None:
    client = BrokerClient(f"amqp://127.0.0.1:{free_port()}/")
    answer = client.post("/api/v1/ingest", b"not a batch", BINARY_CONTENT_TYPE)
    assert answer.status == 400 and "cannot route" in answer.body["error"]
    with pytest.raises(TransportError, match="is a broker"):
        client.get("/api/v1/runs")
