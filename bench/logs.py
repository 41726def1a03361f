"""Log search latency over 10 M and 50 M lines, and _bulk ingest lines/s over HTTP.

Run: python bench/logs.py [--lines 10M,50M] [--repeat 15] [--fts] [--bulk-lines 200000]

For each size, lines are generated straight into a store file with one DuckDB INSERT (a
64-node, 8-rank run, a line every 10 ms: step lines, a NCCL warning every 1000th, a CUDA OOM
every 100 003rd), then typical searches run through the store's search function (what the
collector runs for ``POST /api/v1/logs/search``, limit 100) and their p50/p99 are printed.
``--fts`` also builds DuckDB's fts index (duckdb-extension-fts) and times the source query
through it, for comparison. Last, a collector is started and sent NDJSON _bulk requests of
1000 lines from 4 threads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import httpx

sys.path.insert(0, str(Path(__file__).parent))

from _collector import free_port, start_collector  # noqa: E402

from stepwatch._log_query import parse_query  # noqa: E402
from stepwatch.store import Store  # noqa: E402
from stepwatch.store._log_search import search_logs  # noqa: E402

T0 = 1_780_000_000.0
#: One line every 10 ms: 10 M lines span about a day.
STEP_S = 0.01
SOURCE_QUERY = {
    "query": {
        "bool": {
            "must": [
                {"match": {"message": "CUDA out of memory"}},
                {"match": {"level": "ERROR"}},
            ]
        }
    }
}


def _queries(n: int) -> dict[str, tuple[dict[str, Any], int]]:
    """Name: (query, context lines); time ranges fall in the last hour of the data."""
    end_ms = (T0 + n * STEP_S) * 1000
    window = {"range": {"@timestamp": {"gte": end_ms - 3_600_000, "lte": end_ms}}}
    return {
        "source query": (SOURCE_QUERY, 0),
        "source query, context 5": (SOURCE_QUERY, 5),
        "source query, last hour": (
            {"bool": {**SOURCE_QUERY["query"]["bool"], "filter": [window]}},
            0,
        ),
        "regexp": ({"regexp": {"message": "NCCL WARN .*closed by peer 1[0-9]"}}, 0),
        "node + rank + last hour": (
            {
                "bool": {
                    "filter": [{"term": {"host.name": "node-007"}}, {"term": {"rank": "3"}}, window]
                }
            },
            0,
        ),  # fmt: skip
        "level warning, newest 100": ({"term": {"level": "warning"}}, 0),
        "level warning, context 5": ({"term": {"level": "warning"}}, 5),
    }


def generate(path: Path, n: int) -> float:
    """Write ``n`` log lines into a new store at ``path``; the seconds it took."""
    Store(path).close()  # the schema
    began = time.perf_counter()
    con = duckdb.connect(str(path))
    con.execute(
        f"""INSERT INTO events SELECT
        {T0} + i * {STEP_S}, 'log',
        CASE WHEN i % 100003 = 7 THEN 'RuntimeError: CUDA out of memory. Tried to allocate '
                 || (i % 977) || ' MiB on GPU ' || (i % 8)
             WHEN i % 1000 = 3 THEN 'NCCL WARN net/ib: connection closed by peer ' || (i % 61)
             ELSE 'step ' || i || ' loss=' || round(2.0 + (i % 1000) / 1000.0, 4)
                 || ' lr=3e-4 tokens/s=' || (100000 + i % 5000) END,
        'run-1',
        '{{"node": "node-' || lpad(((i // 8) % 64)::VARCHAR, 3, '0') || '", "rank": "'
            || (i % 8) || '", "run": "run-1"}}',
        CASE WHEN i % 100003 = 7 THEN '{{"level": "error"}}'
             WHEN i % 1000 = 3 THEN '{{"level": "warning"}}' ELSE '{{"level": "info"}}' END,
        i
        FROM range({n}) t(i)"""
    )
    con.close()
    return time.perf_counter() - began


def _timed(run: Callable[[], object], repeat: int) -> tuple[float, float, object]:
    found = run()  # warm
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    times.sort()
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    return statistics.median(times) * 1000, p99 * 1000, found


def search_bench(path: Path, n: int, repeat: int) -> None:
    con = duckdb.connect(str(path), read_only=True)
    now = T0 + n * STEP_S
    for name, (query, context) in _queries(n).items():
        parsed = parse_query(query)

        def run(parsed: Any = parsed, context: int = context) -> object:
            return search_logs(con, parsed, now=now, runs=["run-1"], limit=100, context=context)

        p50, p99, found = _timed(run, repeat)
        print(f"  scan  {name:28s} p50 {p50:8.1f} ms  p99 {p99:8.1f} ms  hits {len(found)}")  # type: ignore[arg-type]
    con.close()


def fts_bench(path: Path, n: int, repeat: int) -> None:
    import duckdb_extension_fts

    folder = Path(duckdb_extension_fts.__path__[0]) / "extensions" / f"v{duckdb.__version__}"
    con = duckdb.connect(str(path))
    con.execute(f"LOAD '{folder / 'fts.duckdb_extension'}'")
    began = time.perf_counter()
    con.execute(
        "PRAGMA create_fts_index('events', 'eid', 'text', stemmer='none', stopwords='none', "
        "overwrite=1)"
    )
    print(f"  fts   index build {time.perf_counter() - began:.1f} s (again after new lines)")
    sql = """SELECT ts, text FROM (SELECT *, fts_main_events.match_bm25(eid, 'cuda out of memory',
        conjunctive := 1) AS score FROM events) WHERE score IS NOT NULL
        AND json_extract_string(data, '$.level') = 'error' ORDER BY ts DESC LIMIT 100"""
    p50, p99, found = _timed(lambda: con.execute(sql).fetchall(), repeat)
    print(f"  fts   {'source query':28s} p50 {p50:8.1f} ms  p99 {p99:8.1f} ms  hits {len(found)}")  # type: ignore[arg-type]
    con.execute("PRAGMA drop_fts_index('events')")
    con.close()


def bulk_bench(workdir: Path, total: int, threads: int = 4, per_request: int = 1000) -> None:
    port = free_port()
    proc = start_collector(workdir / "bulk.duckdb", port, workdir / "bulk.log")
    try:
        url = f"http://127.0.0.1:{port}/_bulk"
        requests = total // per_request

        def body(k: int) -> bytes:
            lines = []
            for j in range(per_request):
                doc = {"@timestamp": (T0 + k * per_request + j) * 1000,
                       "message": f"step {k * per_request + j} loss=2.31 lr=3e-4",
                       "host": {"name": f"node-{j % 64:03d}"}, "log": {"level": "info"},
                       "labels": {"rank": str(j % 8)}}  # fmt: skip
                lines.append('{"index": {}}\n' + json.dumps(doc) + "\n")
            return "".join(lines).encode()

        bodies = [body(k) for k in range(min(requests, 16))]
        todo = list(range(requests))
        lock = threading.Lock()

        def work() -> None:
            with httpx.Client(timeout=60) as client:
                while True:
                    with lock:
                        if not todo:
                            return
                        k = todo.pop()
                    answer = client.post(url, content=bodies[k % len(bodies)])
                    assert answer.status_code == 200 and not answer.json()["errors"], answer.text

        began = time.perf_counter()
        workers = [threading.Thread(target=work) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        took = time.perf_counter() - began
        print(f"  _bulk {requests * per_request} lines in {took:.1f} s: "
              f"{requests * per_request / took:,.0f} lines/s ({threads} senders, "
              f"{per_request} lines a request)")  # fmt: skip
    finally:
        proc.terminate()
        proc.wait()


def _count(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KM")) * scale)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", default="10M,50M", help="sizes, comma-separated (10M,50M)")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--fts", action="store_true", help="also time DuckDB's fts index")
    parser.add_argument("--bulk-lines", type=_count, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stepwatch-logs-") as tmp:
        work = Path(tmp)
        for n in (_count(x) for x in args.lines.split(",")):
            path = work / f"logs-{n}.duckdb"
            took = generate(path, n)
            size = path.stat().st_size / 2**20
            print(f"{n:,} lines: generated in {took:.1f} s, {size:,.0f} MiB")
            search_bench(path, n, args.repeat)
            if args.fts:
                fts_bench(path, n, args.repeat)
            path.unlink()
        if args.bulk_lines:
            bulk_bench(work, args.bulk_lines)


if __name__ == "__main__":
    main()
