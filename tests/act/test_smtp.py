"""The e-mail receiver against a real SMTP server (aiosmtpd on a free loopback port): the
message people get, STARTTLS with a login, and a refused delivery."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope

from stepwatch.act import DeliveryError, EmailReceiver, Notification
from stepwatch.detect import AlertGroup, AlertState

from ._notify_parts import alert


@dataclass
class Inbox:
    """What the server accepted; ``refuse`` answers every message with this code instead."""

    messages: list[tuple[Envelope, Message]] = field(default_factory=list)
    refuse: str = ""

    async def handle_DATA(self, server: Any, session: Any, envelope: Envelope) -> str:  # noqa: N802
        if self.refuse:
            return self.refuse
        assert isinstance(envelope.content, bytes)
        self.messages.append((envelope, message_from_bytes(envelope.content)))
        return "250 OK"


def _login(server: Any, session: Any, envelope: Any, mechanism: str, auth: Any) -> AuthResult:
    ok = auth.login == b"stepwatch" and auth.password == b"pw"
    return AuthResult(success=ok, handled=False)


@pytest.fixture
def inbox(port: int) -> Iterator[tuple[Inbox, int]]:
    """A plain SMTP server on loopback; stopped at the end."""
    box = Inbox()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield box, port
    finally:
        controller.stop()


def _certificate(tmp_path: Path) -> ssl.SSLContext:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("openssl is not installed")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"],
        check=True,
        capture_output=True,
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


@pytest.fixture
def tls_inbox(port: int, tmp_path: Path) -> Iterator[tuple[Inbox, int]]:
    """An SMTP server that needs STARTTLS and a login before it takes mail."""
    box = Inbox()
    controller = Controller(
        box,
        hostname="127.0.0.1",
        port=port,
        tls_context=_certificate(tmp_path),
        require_starttls=True,
        authenticator=_login,
        auth_required=True,
    )
    controller.start()
    try:
        yield box, port
    finally:
        controller.stop()


def _notification(*alerts: Any) -> Notification:
    group = AlertGroup({"kind": "nonfinite", "run": "r1"}, tuple(alerts))
    return Notification("mail", "route:mail:{}", group, "http://collector:7070")


def _receiver(port: int, **options: Any) -> EmailReceiver:
    to = ("oncall@example.org", "lead@example.org")
    return EmailReceiver("mail", "127.0.0.1", port, "stepwatch@example.org", to, **options)


def test_the_message_says_what_since_when_the_value_why_and_what_to_do(
    inbox: tuple[Inbox, int],
) -> None:
    box, port = inbox
    nan = alert(kind="nonfinite", severity="critical", value=float("nan"), baseline=2.5, rank="0")
    _receiver(port).send(_notification(nan))
    ((envelope, message),) = box.messages
    assert envelope.mail_from == "stepwatch@example.org"
    assert envelope.rcpt_tos == ["oncall@example.org", "lead@example.org"]
    assert message["Subject"] == "[FIRING:1] kind=nonfinite run=r1 (critical)"
    body = message.get_payload(decode=True)
    assert isinstance(body, bytes)
    text = body.decode()
    assert "FIRING nonfinite (critical) on rank=0, run=r1" in text
    assert "what happened: nonfinite at nan" in text
    assert "since: 2026-05-28T" in text and "value: NaN" in text
    assert "judged against: 2.5" in text
    assert "why it matters: why nonfinite matters" in text
    assert "playbook: what to do about nonfinite" in text
    assert f"dashboard: http://collector:7070/#/alerts?run=r1&alert={nan.id}" in text


def test_a_resolved_message_says_when_it_ended(inbox: tuple[Inbox, int]) -> None:
    box, port = inbox
    _receiver(port).send(_notification(alert(kind="nonfinite", state=AlertState.RESOLVED)))
    ((_, message),) = box.messages
    assert message["Subject"].startswith("[RESOLVED:1] ")
    body = message.get_payload(decode=True)
    assert isinstance(body, bytes) and "ended: " in body.decode()


def test_starttls_and_login(tls_inbox: tuple[Inbox, int]) -> None:
    box, port = tls_inbox
    with pytest.raises(DeliveryError):  # this server takes nothing in the clear
        _receiver(port).send(_notification(alert()))
    with pytest.raises(DeliveryError, match="535") as caught:
        _receiver(port, starttls=True, username="stepwatch", password="no").send(
            _notification(alert())
        )
    assert not caught.value.retryable  # a wrong password will not get better
    _receiver(port, starttls=True, username="stepwatch", password="pw").send(_notification(alert()))
    assert len(box.messages) == 1


@pytest.mark.parametrize(("code", "retryable"), [("451 try later", True), ("554 no", False)])
def test_a_refusal_says_whether_to_retry(
    inbox: tuple[Inbox, int], code: str, retryable: bool
) -> None:
    box, port = inbox
    box.refuse = code
    with pytest.raises(DeliveryError, match=code[:3]) as caught:
        _receiver(port).send(_notification(alert()))
    assert caught.value.retryable is retryable


def test_no_server_is_a_retryable_failure(port: int) -> None:
    with pytest.raises(DeliveryError, match="could not mail") as caught:
        _receiver(port, timeout_s=2).send(_notification(alert()))
    assert caught.value.retryable
