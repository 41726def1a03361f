"""Compare batch encodings: bytes a sample, encode and decode time, for one 20k-sample batch.

Run: python bench/wire.py [--samples 20000]
SWB is what stepwatch sends; Arrow IPC, msgpack (if installed) and JSON are the alternatives
that were measured for the choice.
"""

from __future__ import annotations

import argparse
import array
import json
import random
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from stepwatch.wire import decode, decode_json, encode


def _columns(n: int) -> dict[str, Any]:
    rng = random.Random(0)
    keys = [
        ("train.step_time_s", {"run": "r1", "rank": str(r), "node": f"node{r // 8}"})
        for r in range(64)
    ]
    return {
        "keys": keys,
        "value": array.array("d", (rng.random() for _ in range(n))),
        "ts": array.array("d", (1.78e9 + i * 0.01 for i in range(n))),
        "step": array.array("q", (i // 64 for i in range(n))),
        "series": array.array("I", (i % 64 for i in range(n))),
    }


def _swb(c: dict[str, Any]) -> tuple[Callable[[], bytes], Callable[[bytes], object]]:
    def enc() -> bytes:
        return encode("src", 1, c["keys"], c["value"], c["ts"], c["step"], c["series"])

    return enc, decode


def _arrow(c: dict[str, Any]) -> tuple[Callable[[], bytes], Callable[[bytes], object]]:
    meta = {b"keys": json.dumps(c["keys"]).encode(), b"source": b"src", b"seq": b"1"}

    def enc() -> bytes:
        table = pa.table(
            {k: pa.array(c[k]) for k in ("value", "ts", "step", "series")}, metadata=meta
        )
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue().to_pybytes()

    return enc, lambda b: pa.ipc.open_stream(b).read_all()


def _json(c: dict[str, Any]) -> tuple[Callable[[], bytes], Callable[[bytes], object]]:
    def enc() -> bytes:
        samples = [
            {"name": c["keys"][s][0], "labels": c["keys"][s][1], "ts": t, "step": st, "value": v}
            for v, t, st, s in zip(c["value"], c["ts"], c["step"], c["series"], strict=True)
        ]
        return json.dumps({"source": "src", "seq": 1, "samples": samples}).encode()

    return enc, decode_json


def _msgpack(c: dict[str, Any]) -> tuple[Callable[[], bytes], Callable[[bytes], object]] | None:
    try:
        import msgpack  # type: ignore[import-not-found]
    except ImportError:
        return None

    def enc() -> bytes:
        cols = {k: c[k].tobytes() for k in ("value", "ts", "step", "series")}
        return msgpack.packb({"source": "src", "seq": 1, "keys": c["keys"], **cols})

    return enc, msgpack.unpackb


def _best(fn: Callable[[], object], repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=20_000)
    n = parser.parse_args().samples
    cols = _columns(n)
    print(f"one batch of {n} samples over 64 series")
    print(f"{'format':<12}{'bytes/sample':>14}{'encode ms':>12}{'decode ms':>12}")
    for name, make in (
        ("SWB v1", _swb),
        ("Arrow IPC", _arrow),
        ("msgpack", _msgpack),
        ("JSON", _json),
    ):
        pair = make(cols)
        if pair is None:
            print(f"{name:<12}  not installed (pip install msgpack)")
            continue
        enc, dec = pair
        frame = enc()
        print(
            f"{name:<12}{len(frame) / n:>14.1f}{_best(enc) * 1e3:>12.2f}"
            f"{_best(lambda f=frame, d=dec: d(f)) * 1e3:>12.2f}"
        )


if __name__ == "__main__":
    main()
