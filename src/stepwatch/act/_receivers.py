"""Receivers: where notifications go. Each one formats a ``Notification`` for its system and
sends it once; retrying is the same for all of them (``Retry``), so it lives here too.

A send that fails raises ``DeliveryError``, saying whether another try may help (a server
error or a refused connection may; a 4xx answer will not).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from .._redact import redact_url, redact_urls
from ._notify_message import Notification

__all__ = [
    "SIGNATURE_HEADER",
    "DeliveryError",
    "Receiver",
    "Retry",
    "SlackReceiver",
    "WebhookReceiver",
    "encode",
    "post_json",
    "sign",
]

#: The header carrying ``sha256=<hex HMAC-SHA256 of the body>`` when a webhook has a secret.
SIGNATURE_HEADER = "X-Stepwatch-Signature"


class DeliveryError(Exception):
    """A send failed; ``retryable`` when trying again later may succeed."""

    def __init__(self, message: str, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True, slots=True)
class Retry:
    """How a failed send is tried again: ``retries`` more times, waiting an exponentially
    growing delay from ``backoff_s`` (capped at ``max_backoff_s``), half of it random so that
    many groups failing together do not retry in lockstep."""

    retries: int = 3
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1 for the first)."""
        full = min(self.max_backoff_s, self.backoff_s * 2.0 ** (attempt - 1))
        return full / 2 + (rng or random).uniform(0.0, full / 2)


class Receiver(Protocol):
    """Something notifications are sent to, by name."""

    @property
    def name(self) -> str: ...
    @property
    def retry(self) -> Retry: ...
    def send(self, notification: Notification) -> None:
        """Deliver once; raise ``DeliveryError`` on failure."""


def sign(body: bytes, secret: str) -> str:
    """The signature header's value: receivers recompute it to trust the body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post_json(url: str, payload: Any, timeout_s: float) -> bytes:
    """POST ``payload`` as JSON and return the body sent. A transport error, 429 or 5xx is
    retryable, another non-2xx answer is not."""
    body = encode(payload)
    return _post(url, body, {"Content-Type": "application/json"}, timeout_s)


def encode(payload: Any) -> bytes:
    """Compact JSON that refuses bare NaN (non-finite values are spelled as strings first)."""
    return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()


def _post(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> bytes:
    """One POST; its errors name the receiver by scheme and host only (the path is a secret)."""
    where = redact_url(url)
    try:
        response = httpx.post(url, content=body, headers=dict(headers), timeout=timeout_s)
    except httpx.TimeoutException:
        raise DeliveryError(f"no answer from {where} within {timeout_s:g} s") from None
    except httpx.HTTPError as exc:
        raise DeliveryError(f"could not reach {where}: {redact_urls(str(exc))}") from None
    if not response.is_success:
        code = response.status_code
        raise DeliveryError(
            f"{where} answered HTTP {code}: {redact_urls(response.text[:200])}",
            retryable=code == 429 or code >= 500,
        )
    return body


@dataclass(frozen=True, slots=True)
class WebhookReceiver:
    """POSTs the group as JSON (``Notification.as_json``), signed with ``secret`` when set."""

    name: str
    url: str = field(repr=False)  # secrets stay out of every repr and log line
    secret: str = field(default="", repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    timeout_s: float = 10.0
    retry: Retry = Retry()

    def send(self, notification: Notification) -> None:
        body = encode(notification.as_json())
        headers = {"Content-Type": "application/json", **self.headers}
        if self.secret:
            headers[SIGNATURE_HEADER] = sign(body, self.secret)
        _post(self.url, body, headers, self.timeout_s)


_COLOURS = {"critical": "#d63a3a", "warning": "#e8a33d", "info": "#3d7fe8"}
_MAX_BLOCKS = 10


def slack_payload(notification: Notification) -> dict[str, Any]:
    """An incoming-webhook message: ``text`` (the fallback and notification line), ``blocks``
    (a header, an incident's cause and playbooks, one section per alert, the first ten) and a
    coloured attachment."""
    n = notification
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": n.title[:150]}}
    ]
    if n.incident is not None:
        said = "\n".join(n.incident.lines())[:3000]
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": said}})
    for alert in n.alerts[:_MAX_BLOCKS]:
        lines = n.alert_lines(alert)
        text = f"*{lines[0]}*\n" + "\n".join(line.strip() for line in lines[1:])
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}})
    if len(n.alerts) > _MAX_BLOCKS:
        more = f"and {len(n.alerts) - _MAX_BLOCKS} more"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": more}]})
    colour = "#2eb67d" if n.status == "resolved" else _COLOURS.get(n.group.severity, "#888888")
    fallback = n.text()
    return {
        "text": n.title,
        "blocks": blocks,
        "attachments": [{"color": colour, "fallback": fallback[:3000], "text": fallback[:3000]}],
    }


@dataclass(frozen=True, slots=True)
class SlackReceiver:
    """POSTs a Slack-compatible incoming-webhook message (Slack, Mattermost, Rocket.Chat)."""

    name: str
    url: str = field(repr=False)  # the URL is the credential
    timeout_s: float = 10.0
    retry: Retry = Retry()

    def send(self, notification: Notification) -> None:
        post_json(self.url, slack_payload(notification), self.timeout_s)
