"""Profiler traces (Chrome/Kineto JSON, as torch.profiler writes them) parsed as a stream and
analysed in bounded memory: where the time goes on each GPU and on the training thread,
operators and kernels by self time, launches, overlap, advice; two traces compared, and the
ranks of one job against each other."""

from ._advice import advise
from ._analysis import analyse_events, analyse_trace
from ._compare import Comparison, OpDelta, RankSkew, compare_ranks, compare_traces
from ._names import span_kind
from ._reader import TraceError, TraceFile
from ._report import Advice, Breakdown, CpuSide, Launches, OpStat, Overlap, TraceReport

__all__ = [
    "Advice",
    "Breakdown",
    "Comparison",
    "CpuSide",
    "Launches",
    "OpDelta",
    "OpStat",
    "Overlap",
    "RankSkew",
    "TraceError",
    "TraceFile",
    "TraceReport",
    "advise",
    "analyse_events",
    "analyse_trace",
    "compare_ranks",
    "compare_traces",
    "span_kind",
]
