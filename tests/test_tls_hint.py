"""A failed handshake said in words: which option the user should pass."""

from __future__ import annotations

import ssl

import pytest

from stepwatch._tls import tls_hint


@pytest.mark.parametrize(
    "error",
    [
        ssl.SSLEOFError(8, "EOF occurred in violation of protocol (_ssl.c:2427)"),
        ConnectionResetError("Server disconnected without sending a response."),
    ],
)
def test_a_mutual_tls_server_hanging_up_asks_for_a_client_certificate(error: OSError) -> None:
    hint = tls_hint(error, "https://collector:7070")
    assert hint is not None and "--client-cert and --client-key" in hint


def test_an_untrusted_certificate_asks_for_the_ca() -> None:
    error = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] self-signed")
    assert "--ca-file" in str(tls_hint(error, "https://collector:7070"))


def test_a_refused_connection_is_no_tls_matter() -> None:
    assert tls_hint(ConnectionRefusedError(111, "Connection refused"), "https://c:1") is None
