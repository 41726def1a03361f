"""What reading a profiler trace costs: stepwatch's streaming parser and analysis against
loading the whole JSON, on traces of 10 MB, 100 MB and 1 GB built from a real CPU profile.

Run: python bench/trace.py [--sizes 10,100,1000] [--hta-python PATH]

1. A real profile: a few training steps of a small transformer layer on the CPU under
   torch.profiler, exported as Chrome JSON (the format Kineto writes on a GPU too).
2. Traces of each size (in MB): the profile's operator events repeated, each copy shifted
   past the last, written as they go into a temporary directory that is deleted after. The
   1 GB trace is built only when the disk has three times its size free.
3. For each, in a fresh child process each time (the peak RSS is the child's alone): the
   streaming reader alone (events read, nothing kept), the reader plus the whole analysis
   (`stepwatch trace`), `json.load` of the file (how torch's own trace loader starts), and,
   given `--hta-python` (a Python where `import hta` works), Holistic Trace Analysis
   loading it (`TraceAnalysis` over a directory holding only it: parsed into pandas
   frames, nothing analysed yet). Wall seconds, MB/s and peak RSS of each. HTA runs on a
   size only while its peak RSS at the size before, scaled, stays under half the memory
   available, and is said to be skipped beyond.
Prints figures; never passes or fails on time.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

#: (imports, timed code) of each child; it prints its wall seconds, peak RSS and events.
_CHILD = {
    "stepwatch reader": (
        "from stepwatch.trace import TraceFile",
        "with TraceFile(PATH) as f:\n    n = sum(1 for _ in f.events())",
    ),
    "stepwatch analysis": (
        "from stepwatch.trace import analyse_trace",
        "n = analyse_trace(PATH).events",
    ),
    "json.load": ("", "with open(PATH) as f:\n    n = len(json.load(f)['traceEvents'])"),
}
#: HTA's loader: the trace alone in a directory, as TraceAnalysis reads one.
_HTA = (
    "import logging, os, tempfile\nlogging.disable(logging.WARNING)\n"
    "from hta.trace_analysis import TraceAnalysis",
    "d = tempfile.mkdtemp()\nos.symlink(PATH, os.path.join(d, os.path.basename(PATH)))\n"
    "ta = TraceAnalysis(trace_dir=d)\nn = sum(len(df) for df in ta.t.traces.values())",
)
#: The peak RSS is the kernel's high-water mark of the child's own memory (VmHWM: new at
#: exec, unlike ru_maxrss, which keeps the forked parent's).
_WRAP = """
import json, re, sys, time
{imports}
PATH = sys.argv[1]
t0 = time.perf_counter()
{body}
wall = time.perf_counter() - t0
with open("/proc/self/status") as status:
    rss = int(re.search(r"VmHWM:\\s+(\\d+) kB", status.read()).group(1)) * 1024
print(json.dumps({{"wall_s": wall, "rss_bytes": rss, "events": n}}))
"""


def profile_model(path: Path, steps: int = 6) -> None:
    """A real CPU profile: a transformer layer's training steps, with a DataLoader."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                             batch_first=True)  # fmt: skip
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(torch.randn(steps * 8, 32, 64), batch_size=8)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for i, x in enumerate(loader):
            with record_function(f"ProfilerStep#{i}"):
                layer(x).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
    prof.export_chrome_trace(str(path))


def replicate(source: Path, target: Path, size_bytes: int) -> int:
    """A trace of about ``size_bytes``: the source's events repeated and shifted, streamed
    to disk in Kineto's layout (one indented object per event)."""
    events = [e for e in json.loads(source.read_text())["traceEvents"]
              if e.get("ph") == "X" and isinstance(e.get("pid"), int)]  # fmt: skip
    first = min(e["ts"] for e in events)
    period = max(e["ts"] + e["dur"] for e in events) - first + 10.0
    copies = 0
    with target.open("w") as out:
        out.write('{"schemaVersion": 1, "traceEvents": [\n')
        sep = ""
        while out.tell() < size_bytes:
            chunk = []
            for e in events:
                chunk.append(sep + json.dumps(dict(e, ts=round(e["ts"] + copies * period, 3)),
                                              indent=2))  # fmt: skip
                sep = ",\n"
            out.write("".join(chunk))
            copies += 1
        out.write('\n], "traceName": "replicated"}\n')
    return copies


def measure(child: tuple[str, str], path: Path, python: str = sys.executable) -> dict[str, float]:
    imports, body = child
    code = _WRAP.format(imports=imports, body=body)
    done = subprocess.run([python, "-c", code, str(path)], capture_output=True, text=True,
                          check=True, cwd=path.parent)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def available_bytes() -> int:
    """Memory the machine can still give (MemAvailable)."""
    with open("/proc/meminfo") as meminfo:
        return int(re.search(r"MemAvailable:\s+(\d+) kB", meminfo.read()).group(1)) * 1024


def print_row(size: int, what: str, r: dict[str, float]) -> None:
    print(f"{size / 1e6:>6.0f}MB {r['events']:>11,}  {what:<20} {r['wall_s']:>8.2f} "
          f"{size / 1e6 / r['wall_s']:>7.1f} {r['rss_bytes'] / 2**20:>7.0f} MiB",
          flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000",
                        help="trace sizes in MB (comma-separated)")  # fmt: skip
    parser.add_argument("--hta-python", help="a Python where `import hta` works: HTA timed too")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="stepwatch-trace-bench-") as tmp:
        root = Path(tmp)
        source = root / "profile.json"
        profile_model(source)
        n = sum(1 for e in json.loads(source.read_text())["traceEvents"] if e.get("ph") == "X")
        print(f"real profile: {source.stat().st_size / 1e6:.2f} MB, {n:,} complete events")
        if not args.hta_python:
            print("HTA (Holistic Trace Analysis): no --hta-python given, not measured")
        hta_bytes_per_mb = 0.0  # HTA's peak RSS per MB of trace at the last size it ran
        print(
            f"{'size':>8} {'events':>11}  {'what':<20} {'wall s':>8} {'MB/s':>7} {'peak RSS':>10}"
        )
        for mb in sizes:
            if shutil.disk_usage(root).free < 3 * mb * 1e6:
                print(f"{mb} MB: skipped, less than {3 * mb} MB free on {root}")
                continue
            path = root / f"trace-{mb}mb.json"
            replicate(source, path, mb * 1_000_000)
            size = path.stat().st_size
            for what, child in _CHILD.items():
                print_row(size, what, measure(child, path))
            if args.hta_python:
                need = hta_bytes_per_mb * size / 1e6
                if need > available_bytes() / 2:
                    print(f"{size / 1e6:>6.0f}MB  HTA skipped: about {need / 2**30:.1f} GiB "
                          f"expected, over half of the memory available")  # fmt: skip
                else:
                    r = measure(_HTA, path, args.hta_python)
                    hta_bytes_per_mb = r["rss_bytes"] / (size / 1e6)
                    print_row(size, "HTA TraceAnalysis", r)
            path.unlink()


if __name__ == "__main__":
    main()
