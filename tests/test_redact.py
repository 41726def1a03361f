"""A URL is shown by its scheme and host: the path, query and userinfo may be credentials."""

from __future__ import annotations

import pytest

from stepwatch._redact import redact_url, redact_urls


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://hooks.slack.com/services/T0/B0/s3cret", "https://hooks.slack.com/…"),
        ("http://admin:s3cret@am.example:9093", "http://am.example:9093/…"),
        ("http://am.example:9093/", "http://am.example:9093"),
        ("https://h.example/x?token=s3cret", "https://h.example/…"),
        ("http://[::1]:8080/s3cret", "http://[::1]:8080/…"),
        ("s3cret", "(a URL)"),
        ("http://h.example:99999999/s3cret", "(a URL)"),
    ],
)
def test_a_url_keeps_its_scheme_and_host_only(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_urls_in_a_sentence_are_redacted_and_the_sentence_kept() -> None:
    text = (
        "could not reach https://hooks.slack.com/services/T0/s3cret: refused (http://u:s3cret@h/)"
    )
    assert redact_urls(text) == "could not reach https://hooks.slack.com/…: refused (http://h/…)"
