"""The notification config (``stepwatch server --notify FILE``): receivers and the route tree,
read from YAML with errors that point at ``file:line: field``.

Secrets stay out of the file: ``${VAR}`` in a receiver's setting is the environment variable.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._redact import redact_url
from ..config import At, Problems, RuleError, compose, read_config
from ..detect import Matcher
from ._receivers import Receiver, Retry, SlackReceiver, WebhookReceiver
from ._receivers_alertmanager import AlertmanagerReceiver
from ._receivers_mail import EmailReceiver
from ._routing import Route

__all__ = ["RECEIVER_TYPES", "NotifyConfig", "load_notify_config", "parse_notify_config"]

_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_COMMON = ("name", "type", "timeout", "retries", "backoff", "max_backoff")
_ROUTE_KEYS = (
    "receiver",
    "matchers",
    "group_by",
    "group_wait",
    "group_interval",
    "repeat_interval",
    "send_resolved",
    "continue",
    "routes",
)


@dataclass(frozen=True, slots=True)
class NotifyConfig:
    """Receivers by name, the route tree, and the dashboard URL alerts link to (the collector
    fills in its own when the file names none)."""

    receivers: dict[str, Receiver]
    route: Route
    external_url: str = ""

    def but(self, **changes: Any) -> NotifyConfig:
        return dataclasses.replace(self, **changes)


class _Reader:
    """One file's reading: its environment for ``${VAR}``."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def setting(self, at: At) -> str:
        """A string setting with ``${VAR}`` replaced from the environment."""

        def value(match: re.Match[str]) -> str:
            if match.group(1) not in self.env:
                raise at.error(f"environment variable {match.group(1)} is not set")
            return self.env[match.group(1)]

        return _VAR_RE.sub(value, at.text())

    def url(self, at: At) -> str:
        text = self.setting(at)
        if not text.startswith(("http://", "https://")):
            got = repr(redact_url(text)) if "://" in text else "no scheme"  # it may be a secret
            raise at.error(f"expected an http:// or https:// URL, got {got}")
        return text


def _flag(at: At) -> bool:
    value = at.scalar()
    if not isinstance(value, bool):
        raise at.error(f"expected true or false, got {at.node.value!r}")
    return value


def _count(at: At) -> int:
    value = at.number()
    if value < 0 or value != int(value):
        raise at.error(f"expected a whole number of at least 0, got {at.node.value!r}")
    return int(value)


def _host_port(at: At, text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise at.error(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def _webhook(r: _Reader, f: dict[str, At], name: str, timeout: float, retry: Retry) -> Receiver:
    secret = r.setting(f["secret"]) if "secret" in f else ""
    headers = (
        {k: r.setting(v) for k, v in f["headers"].mapping(None).items()} if "headers" in f else {}
    )
    return WebhookReceiver(name, r.url(f["url"]), secret, headers, timeout, retry)


def _slack(r: _Reader, f: dict[str, At], name: str, timeout: float, retry: Retry) -> Receiver:
    return SlackReceiver(name, r.url(f["url"]), timeout, retry)


def _email(r: _Reader, f: dict[str, At], name: str, timeout: float, retry: Retry) -> Receiver:
    host, port = _host_port(f["smarthost"], r.setting(f["smarthost"]))
    to_at = f["to"]
    to = tuple(r.setting(i) for i in to_at.items()) if to_at.is_list else (r.setting(to_at),)
    if not to:
        raise to_at.error("expected an address or a list of addresses")
    return EmailReceiver(
        name,
        host,
        port,
        r.setting(f["from"]),
        to,
        starttls=_flag(f["starttls"]) if "starttls" in f else False,
        username=r.setting(f["username"]) if "username" in f else "",
        password=r.setting(f["password"]) if "password" in f else "",
        timeout_s=timeout,
        retry=retry,
    )


def _alertmanager(
    r: _Reader, f: dict[str, At], name: str, timeout: float, retry: Retry
) -> Receiver:
    return AlertmanagerReceiver(name, r.url(f["url"]), timeout, retry)


_Build = Callable[[_Reader, dict[str, At], str, float, Retry], Receiver]
#: Each type: its own keys, the required ones among them, and how it is built.
RECEIVER_TYPES: dict[str, tuple[tuple[str, ...], tuple[str, ...], _Build]] = {
    "webhook": (("url", "secret", "headers"), ("url",), _webhook),
    "slack": (("url",), ("url",), _slack),
    "email": (
        ("smarthost", "from", "to", "starttls", "username", "password"),
        ("smarthost", "from", "to"),
        _email,
    ),
    "alertmanager": (("url",), ("url",), _alertmanager),
}


def _receiver(reader: _Reader, at: At) -> Receiver:
    kind_at = at.mapping(None, ("name", "type"))["type"]
    kind = kind_at.text()
    if kind not in RECEIVER_TYPES:
        raise kind_at.error(
            f"unknown receiver type {kind!r}; expected one of {', '.join(sorted(RECEIVER_TYPES))}"
        )
    own, required, build = RECEIVER_TYPES[kind]
    f = at.mapping((*_COMMON, *own), ("name", "type", *required))
    default = Retry()
    retry = Retry(
        _count(f["retries"]) if "retries" in f else default.retries,
        f["backoff"].duration() if "backoff" in f else default.backoff_s,
        f["max_backoff"].duration() if "max_backoff" in f else default.max_backoff_s,
    )
    timeout = f["timeout"].duration() if "timeout" in f else 10.0
    if timeout <= 0:
        raise f["timeout"].error("expected a duration above 0")
    return build(reader, f, f["name"].text(), timeout, retry)


def _matcher(at: At) -> Matcher:
    try:
        return Matcher.parse(at.text())
    except ValueError as exc:
        raise at.error(str(exc)) from None


def _route(at: At, parent: Route | None, receivers: Mapping[str, Receiver]) -> Route:
    f = at.mapping(_ROUTE_KEYS, () if parent else ("receiver",))
    base = parent or Route("")
    receiver = f["receiver"].text() if "receiver" in f else base.receiver
    if "receiver" in f and receiver not in receivers:
        known = ", ".join(sorted(receivers)) or "none"
        raise f["receiver"].error(f"no receiver named {receiver!r} (receivers: {known})")
    if parent is None and ("matchers" in f or "continue" in f):
        key = "matchers" if "matchers" in f else "continue"
        raise f[key].error("the root route takes every alert: no matchers, no continue")
    route = Route(
        receiver,
        tuple(_matcher(m) for m in f["matchers"].items()) if "matchers" in f else (),
        tuple(f["group_by"].str_list()) if "group_by" in f else base.group_by,
        f["group_wait"].duration() if "group_wait" in f else base.group_wait,
        f["group_interval"].duration() if "group_interval" in f else base.group_interval,
        f["repeat_interval"].duration() if "repeat_interval" in f else base.repeat_interval,
        _flag(f["send_resolved"]) if "send_resolved" in f else base.send_resolved,
        _flag(f["continue"]) if "continue" in f else False,
        (),
        at.path,
    )
    if "routes" in f:
        children = tuple(_route(child, route, receivers) for child in f["routes"].items())
        route = dataclasses.replace(route, routes=children)
    return route


def parse_notify_config(
    text: str, source: str = "<notify>", env: Mapping[str, str] | None = None
) -> NotifyConfig:
    """The config in ``text``; the RuleError raised names ``source:line: field`` of the first
    mistake of every wrong receiver, in line order, else the route's.

    Args:
        text: the YAML document.
        source: the file name errors cite.
        env: where ``${VAR}`` comes from (default: this process's environment).
    """
    node = compose(text, source)
    if node is None:
        raise RuleError(source, None, "", "the file is empty; expected receivers and route")
    top = At(node, "", source).mapping(
        ("receivers", "route", "external_url"), ("receivers", "route")
    )
    reader = _Reader(os.environ if env is None else env)
    problems = Problems()
    receivers: dict[str, Receiver] = {}
    for at in top["receivers"].items():
        receiver = problems.check(_receiver, reader, at, default=None)
        if receiver is None:
            continue  # its mistake is noted; the other receivers are still checked
        if receiver.name in receivers:
            twice = f"receiver {receiver.name!r} is named twice"
            problems.add(at.mapping(None)["name"].error(twice))
        receivers[receiver.name] = receiver
    external = ""
    if "external_url" in top:
        external = problems.check(reader.url, top["external_url"], default="")
    if problems:  # a route naming a wrong receiver would only repeat its mistake
        problems.raise_any()
    route = _route(top["route"], None, receivers)
    return NotifyConfig(receivers, route, external.rstrip("/"))


def load_notify_config(path: str | Path, env: Mapping[str, str] | None = None) -> NotifyConfig:
    """Read and validate a config file."""
    path = Path(path)
    text = read_config(path)
    return parse_notify_config(text, str(path), env)
