"""A stand-in for an analyst model: a real HTTP server on a free loopback port speaking the
OpenAI chat-completions protocol (POST .../v1/chat/completions), recording each request and
answering with the next of its canned answers (a completion of ``text`` once they run out).
``HANG`` waits, unanswered, until the server stops (``_recorder``)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from _recorder import HANG, Answer, Recorder, serving

__all__ = ["HANG", "Asked", "ChatModel", "chat_model", "completion"]


def completion(text: str) -> bytes:
    """A chat completion whose one choice says ``text``."""
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop",
    }
    return json.dumps({"id": "cmpl-1", "object": "chat.completion", "choices": [choice]}).encode()


@dataclass
class Asked:
    """One request the model was sent, its body read."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        return "\n".join(str(m["content"]) for m in self.body["messages"])


@dataclass
class ChatModel(Recorder):
    """A recorder that answers, once its canned answers run out, a completion of ``text``."""

    text: str = "The loss went NaN after an OOM.\nPLAYBOOK: none"
    content_type: str = "application/json"

    def reply(self) -> tuple[int, bytes]:
        return 200, completion(self.text)

    @property
    def asked(self) -> list[Asked]:
        """Every request so far, in order."""
        with self.arrived:
            return [Asked(r.path, r.headers, json.loads(r.body)) for r in self.requests]


@contextmanager
def chat_model(text: str | None = None, answers: Sequence[Answer] = ()) -> Iterator[ChatModel]:
    """The model's server, its base URL (``…/v1``) in ``url``; stopped at the end."""
    model = ChatModel(answers=list(answers))
    if text is not None:
        model.text = text
    with serving(model, "chat-model"):
        model.url += "/v1"
        yield model
