"""What an event's name says: communication, memory copy, a kernel launch, and the operator
family it belongs to (for the advice on fused kernels)."""

from __future__ import annotations

import re

__all__ = [
    "FAMILIES",
    "family",
    "fusion_hint",
    "is_comm_exec",
    "is_comm_kernel",
    "is_comm_op",
    "is_launch",
    "is_memcpy_op",
    "span_kind",
]

#: CPU-side collectives: the c10d ops, the backends' own annotations, the comms record.
_COMM_OP = re.compile(r"^(?:_?c10d(?:_functional)?::|gloo:|nccl:|record_param_comms$)")
#: The backends' annotations are where a collective runs (its wait included), not where it
#: is enqueued.
_COMM_EXEC = ("gloo:", "nccl:")
_MEMCPY_OP = frozenset(
    ("aten::copy_", "aten::to", "aten::_to_copy", "aten::clone", "aten::contiguous")
)
_LAUNCH = re.compile(r"LaunchKernel|^cuLaunch|^hipModuleLaunch|^hipExtModuleLaunch")

#: Operator and kernel families, first match wins, and what fusing them means.
FAMILIES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("attention", re.compile(r"flash|fmha|attention|sdpa|scaled_dot"),
     "a fused attention kernel (F.scaled_dot_product_attention, FlashAttention) keeps the "
     "scores out of memory"),
    ("optimizer", re.compile(r"optimizer|multi_tensor|adam|sgd|lamb|_foreach"),
     "a fused optimizer (fused=True, or foreach) updates every parameter in a few kernels"),
    ("normalization", re.compile(r"layer_?norm|rms_?norm|batch_?norm|group_?norm|native_norm"),
     "a fused LayerNorm/RMSNorm kernel (torch.compile, Apex, Transformer Engine) reads the "
     "activations once"),
    ("softmax", re.compile(r"softmax"),
     "a fused softmax (or a fused attention kernel around it) saves passes over memory"),
    ("matmul", re.compile(r"gemm|cutlass|xmma|cublas|matmul|(?:^|::|_)(?:add|b|baddb|addb)?mm"
                          r"(?:_|$|backward)|linear|addmmbackward|mmbackward"),
     "matrix multiplies: bf16/TF32 run them on tensor cores, and torch.compile fuses their "
     "bias and activation epilogues"),
    ("convolution", re.compile(r"conv|cudnn|winograd|implicit_gemm"),
     "channels_last and cudnn.benchmark pick faster convolution kernels; torch.compile fuses "
     "what follows them"),
    ("embedding", re.compile(r"embedding|index_select|gather|scatter"),
     "a fused embedding (or sparse gradients) saves the gathers and scatters"),
    ("copy", re.compile(r"copy|_to_copy|contiguous|clone|cat$|::cat|transpose|permute"),
     "layout copies: keep tensors contiguous in the layout their consumer wants, or let "
     "torch.compile fold the copies away"),
    ("reduction", re.compile(r"reduce|sum|mean|amax|max|min"),
     "reductions: torch.compile fuses them with the elementwise ops around them"),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|add|mul|div|sub|relu|gelu|silu"
                               r"|sigmoid|tanh|fill|pow|exp|where|dropout|threshold"),
     "elementwise kernels: torch.compile fuses chains of them into one pass over memory"),
)  # fmt: skip


def is_comm_op(name: str) -> bool:
    """A CPU-side collective (c10d op, gloo/nccl annotation, the comms record)."""
    return _COMM_OP.match(name) is not None


def is_comm_exec(name: str) -> bool:
    """A backend's own annotation of a running collective (gloo:all_reduce)."""
    return name.startswith(_COMM_EXEC)


def is_comm_kernel(name: str) -> bool:
    """An NCCL (or RCCL) kernel: GPU time spent communicating."""
    lower = name.lower()
    return "nccl" in lower or "rccl" in lower


def is_memcpy_op(name: str) -> bool:
    """A CPU op that copies memory (the CPU timeline's memcpy)."""
    return name in _MEMCPY_OP


def span_kind(name: str, cat: str) -> str:
    """What a span of a timeline is, by the same rules as the analysis: comm, memcpy, kernel,
    step (an annotation), runtime, python or cpu."""
    if is_comm_op(name) or is_comm_kernel(name):
        return "comm"
    if cat in ("gpu_memcpy", "gpu_memset") or (cat == "cpu_op" and is_memcpy_op(name)):
        return "memcpy"
    if cat == "kernel":
        return "kernel"
    if cat in ("user_annotation", "gpu_user_annotation"):
        return "step"
    if cat in ("cuda_runtime", "cuda_driver"):
        return "runtime"
    return "python" if cat == "python_function" else "cpu"


def is_launch(name: str) -> bool:
    """A runtime or driver call that launches one kernel."""
    return _LAUNCH.search(name) is not None


def family(name: str) -> str:
    """The family of an operator or kernel name; the name itself when none fits."""
    lower = name.lower()
    for fam, pattern, _ in FAMILIES:
        if pattern.search(lower):
            return fam
    return name


def fusion_hint(fam: str) -> str:
    """What to do about a family that takes much of the step."""
    for name, _, hint in FAMILIES:
        if name == fam:
            return hint
    return "a fused kernel (torch.compile, or a library's fused op) may do it in fewer passes"
