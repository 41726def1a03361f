"""Secrets out of words: a URL is shown by its scheme and host only, because for a Slack or
webhook receiver the path is the credential, and userinfo or a query may carry a password or
a token. Everything that logs, audits or answers with a receiver's address goes through here.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["redact_url", "redact_urls"]

_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redact_url(url: str) -> str:
    """``https://hooks.slack.com/services/T0/B0/xyz`` -> ``https://hooks.slack.com/…``."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(a URL)"
    if not parts.scheme or not host:
        return "(a URL)"
    if ":" in host:
        host = f"[{host}]"
    where = f"{parts.scheme}://{host}{f':{port}' if port else ''}"
    hidden = parts.username or parts.password or parts.query or parts.fragment
    return where + ("/…" if hidden or parts.path not in ("", "/") else "")


def redact_urls(text: str) -> str:
    """``text`` with every URL in it redacted (an error message that quotes one)."""

    def one(match: re.Match[str]) -> str:
        url = match.group(0)
        bare = url.rstrip(".,:;)")  # the sentence's punctuation stays
        return redact_url(bare) + url[len(bare) :]

    return _URL_RE.sub(one, text)
