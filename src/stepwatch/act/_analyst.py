"""The analyst: a model behind an OpenAI-compatible chat endpoint (vLLM, llama.cpp's server,
Ollama, a hosted API) asked what an incident's context says. Its answer is text for people
and, at most, the names of configured playbooks it suggests; nothing it says runs anything.

Every failure (no answer in time, no connection, an HTTP error, an answer that is not the
protocol's JSON) is one ``AnalystError`` whose message names the endpoint by scheme and host
only and never carries the key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from .._redact import redact_url, redact_urls

__all__ = ["MAX_SUGGESTED", "AnalystConfig", "AnalystError", "ask", "chat_url", "suggested"]

#: The largest answer read; a longer one is a failure, not a truncated analysis.
MAX_ANSWER_BYTES = 1 << 20
#: Playbooks an analysis may name at most.
MAX_SUGGESTED = 3
#: The line an answer names a playbook on (see the prompt).
_PLAYBOOK_LINE = re.compile(r"^\W*playbooks?\W*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)

Message = Mapping[str, str]


class AnalystError(Exception):
    """The analyst gave no usable answer; the message says why (no secret in it), ``reason``
    in a word: ``timeout``, ``unreachable``, ``http_error`` or ``bad_answer``."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class AnalystConfig:
    """Where the analyst is and how it is asked (``stepwatch server --analyst``).

    Attributes:
        url: the endpoint's base URL as OpenAI clients take it (``http://host:8000/v1``), or
            the full chat-completions URL.
        model: the model name the endpoint serves.
        key: sent as a bearer token when set; never shown.
        timeout_s: how long one answer may take.
        interval_s: how often the collector looks for incidents to analyse.
        max_tokens: how long an answer may be, in the model's tokens.
    """

    url: str = field(repr=False)  # a URL may carry a secret too: ``where`` names it
    model: str
    key: str = field(default="", repr=False)
    timeout_s: float = 120.0
    interval_s: float = 10.0
    max_tokens: int = 1024

    def __post_init__(self) -> None:
        """A wrong value fails here, before the collector starts."""
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the analyst's URL must be http(s)://host…: {redact_url(self.url)}")
        if not self.model.strip():
            raise ValueError("the analyst needs the name of the model to ask (--analyst-model)")
        if not (self.timeout_s > 0 and self.interval_s > 0 and self.max_tokens > 0):
            raise ValueError("the analyst's timeout, interval and answer length must be above 0")

    @property
    def where(self) -> str:
        """The endpoint as logs and errors name it (scheme and host)."""
        return redact_url(self.url)


def chat_url(url: str) -> str:
    """The chat-completions URL of ``url``: as given when it ends so; ``/v1/chat/completions``
    on a bare host; else ``/chat/completions`` under the base (``…/v1``, Ollama's too)."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if path.endswith("/chat/completions"):
        return url
    path += "/chat/completions" if path else "/v1/chat/completions"
    return parts._replace(path=path).geturl()


def ask(config: AnalystConfig, messages: Sequence[Message]) -> str:
    """The model's answer to ``messages``; AnalystError when there is none to use."""
    payload = {
        "model": config.model,
        "messages": [dict(m) for m in messages],
        "temperature": 0.2,
        "max_tokens": config.max_tokens,
        "stream": False,
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if config.key:
        headers["Authorization"] = f"Bearer {config.key}"
    body = _post(config, json.dumps(payload).encode(), headers)
    return _content(config, body)


def _post(config: AnalystConfig, body: bytes, headers: Mapping[str, str]) -> bytes:
    """One POST, its answer read up to ``MAX_ANSWER_BYTES``."""
    where = config.where
    try:
        with (
            httpx.Client(timeout=config.timeout_s, follow_redirects=False) as client,
            client.stream("POST", chat_url(config.url), content=body, headers=headers) as got,
        ):
            if not got.is_success:
                raise AnalystError(f"{where} answered HTTP {got.status_code}", "http_error")
            read = bytearray()
            for chunk in got.iter_bytes():
                read += chunk
                if len(read) > MAX_ANSWER_BYTES:
                    raise AnalystError(
                        f"{where} answered more than {MAX_ANSWER_BYTES} bytes", "bad_answer"
                    )
            return bytes(read)
    except httpx.TimeoutException:
        raise AnalystError(
            f"no answer from {where} within {config.timeout_s:g} s", "timeout"
        ) from None
    except httpx.HTTPError as exc:
        said = redact_urls(str(exc))
        if config.key:
            said = said.replace(config.key, "…")
        raise AnalystError(f"could not reach {where}: {said}", "unreachable") from None


def _content(config: AnalystConfig, body: bytes) -> str:
    """``choices[0].message.content`` of a chat completion; AnalystError for another shape."""
    try:
        answer = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise AnalystError(
            f"{config.where} answered something other than JSON", "bad_answer"
        ) from None
    try:
        text = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise AnalystError(
            f"{config.where} answered JSON without choices[0].message.content", "bad_answer"
        ) from None
    if not isinstance(text, str) or not text.strip():
        raise AnalystError(f"{config.where} answered an empty message", "bad_answer")
    return text.strip()


def suggested(text: str, playbooks: Collection[str]) -> list[str]:
    """The playbooks an answer names on its ``PLAYBOOK:`` lines that are among ``playbooks``
    (the configured ones), in order, at most ``MAX_SUGGESTED``; any other name is ignored."""
    found: list[str] = []
    for line in _PLAYBOOK_LINE.findall(text):
        for name in re.split(r"[,\s]+", line.strip("`*\"' ")):
            name = name.strip("`*\"'.")
            if name in playbooks and name not in found:
                found.append(name)
    return found[:MAX_SUGGESTED]
