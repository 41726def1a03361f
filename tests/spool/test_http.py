"""The collector client's answers: which of them are worth sending again."""

from __future__ import annotations

import pytest

from stepwatch.spool import Response


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(500, True), (503, True), (408, True), (429, True),
     (200, False), (400, False), (401, False), (404, False)],
)  # fmt: skip
def test_server_errors_timeouts_and_too_many_requests_are_retryable(
    status: int, retryable: bool
) -> None:
    assert Response(status, {}).retryable is retryable
