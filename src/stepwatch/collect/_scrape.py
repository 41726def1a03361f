"""Scraping a Prometheus exporter (node_exporter, DCGM, nvidia_gpu_exporter) into our names.

Every scrape reports on itself (``scrape.up``, ``scrape.duration_s``); a failed
one is an event once per failure streak, never an exception, and the counters
of the last good scrape stay the baseline for the next rate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from ..model import Event
from ._exporters import DEFAULT_MAPPING
from ._scrape_parse import ExpositionError, parse_exposition
from ._scrape_rules import Emit, Rule, Scrape
from ._source import Reading, Sample

__all__ = ["ScrapeSource"]

#: Ask for the classic text format: OpenMetrics adds exemplars and ``# EOF`` we do not read.
_ACCEPT = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"


class ScrapeSource:
    """Scrapes one exporter URL and maps what it knows onto our metric names.

    Args:
        url: the exporter's metrics URL (``http://127.0.0.1:9100/metrics``).
        interval_s: seconds between scrapes.
        timeout_s: how long one scrape may take before it counts as failed.
        mapping: the rows that turn exporter samples into ours (see ``_exporters``).
        client: the HTTP client (e.g. with ``httpx.MockTransport``); one is made, and
            closed by ``close``, when not given.
        clock: monotonic seconds, for rates and the scrape duration.
    """

    name = "scrape"

    def __init__(
        self,
        url: str,
        *,
        interval_s: float = 15.0,
        timeout_s: float = 5.0,
        mapping: Sequence[Rule] = DEFAULT_MAPPING,
        client: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = str(httpx.URL(url))  # a malformed URL is a configuration error: raise now
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.mapping = tuple(mapping)
        self._client = client if client is not None else httpx.Client()
        self._owns_client = client is None
        self._clock = clock
        self._memory: list[dict[Any, Any]] = [{} for _ in self.mapping]
        self._failing = False

    def read(self, now: float) -> Reading:
        start = self._clock()
        scrape, problem = self._scrape(start)
        target = {"target": self.url}
        emit = Emit(now)
        if scrape is not None:
            for rule, memory in zip(self.mapping, self._memory, strict=True):
                rule.apply(scrape, memory, emit)
        reading = emit.reading
        reading.samples.append(Sample("scrape.up", 0.0 if problem else 1.0, target))
        reading.samples.append(Sample("scrape.duration_s", self._clock() - start, dict(target)))
        if problem is None:
            self._failing = False
        elif not self._failing:
            self._failing = True
            text = f"scrape of {self.url} failed: {problem}"
            data = {"url": self.url, "error": problem}
            reading.events.append(Event(now, "scrape_error", text, dict(target), data))
        return reading

    def close(self) -> None:
        """Close the HTTP client if this source made it."""
        if self._owns_client:
            self._client.close()

    def _scrape(self, start: float) -> tuple[Scrape | None, str | None]:
        """The parsed scrape, or None and what went wrong."""
        try:
            response = self._client.get(
                self.url, headers={"Accept": _ACCEPT}, timeout=self.timeout_s
            )
        except httpx.TimeoutException:
            return None, f"no answer within {self.timeout_s:g} s"
        except httpx.HTTPError as exc:
            return None, f"{type(exc).__name__}: {exc}"
        if response.status_code != 200:
            return None, f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
        try:
            return Scrape(start, parse_exposition(response.text)), None
        except ExpositionError as exc:
            return None, f"not a valid exposition, {exc}"
