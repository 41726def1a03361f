"""A stand-in for an analyst model: a real HTTP server on a free loopback port speaking the
OpenAI chat-completions protocol (POST .../v1/chat/completions), recording each request and
answering with the next of its canned answers (a completion of ``text`` once they run out).
``HANG`` waits, unanswered, until the server stops."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

WAIT_S = 30.0
#: An answer that never comes (until the server stops).
HANG = (0, b"")


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
    """One request the model was sent."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        return "\n".join(str(m["content"]) for m in self.body["messages"])


@dataclass
class ChatModel:
    """What the model was asked, and what it answers: ``answers`` (status, body) in order,
    then a completion of ``text``."""

    text: str = "The loss went NaN after an OOM.\nPLAYBOOK: none"
    answers: list[tuple[int, bytes]] = field(default_factory=list)
    url: str = ""
    asked: list[Asked] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    released: threading.Event = field(default_factory=threading.Event)

    def wait_for(self, count: int, timeout: float = WAIT_S) -> list[Asked]:
        """The first ``count`` requests, once they have come (fewer after ``timeout``)."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.asked) >= count, timeout)
            return list(self.asked)


def _handler(model: ChatModel) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with model.arrived:
                model.asked.append(Asked(self.path, dict(self.headers), json.loads(body)))
                status, answer = (
                    model.answers.pop(0) if model.answers else (200, completion(model.text))
                )
                model.arrived.notify_all()
            if (status, answer) == HANG:
                model.released.wait(WAIT_S)
                return
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextmanager
def chat_model(
    text: str | None = None, answers: Sequence[tuple[int, bytes]] = ()
) -> Iterator[ChatModel]:
    """The model's server, its base URL (``…/v1``) in ``url``; stopped at the end."""
    model = ChatModel(answers=list(answers))
    if text is not None:
        model.text = text
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(model))
    server.daemon_threads = False  # each request's thread is joined on close
    model.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, name="chat-model")
    thread.start()
    try:
        yield model
    finally:
        model.released.set()
        server.shutdown()
        server.server_close()
        thread.join()
