"""A hub of live streams holds a bounded number of them: one more is a 503, not more memory."""

from __future__ import annotations

import asyncio

import pytest

from stepwatch.server._errors import ApiError
from stepwatch.server._stream import StreamHub


def test_one_stream_over_the_limit_is_refused_until_one_closes() -> None:
    async def scenario() -> None:
        hub = StreamHub(max_streams=2)
        streams = [hub.events(run) for run in ("r1", "r2")]
        for stream in streams:
            assert (await anext(stream)).startswith("retry:")
        with pytest.raises(ApiError) as refused:
            hub.response("r3")
        assert refused.value.status == 503
        assert refused.value.headers == {"Retry-After": "5"}
        assert "too many open streams" in refused.value.message
        await streams[0].aclose()
        assert hub.response("r3").media_type == "text/event-stream"
        hub.close()
        await streams[1].aclose()

    asyncio.run(scenario())
