"""Training metrics read from the lines a framework prints, for jobs that cannot import the SDK.

Megatron-LM, DeepSpeed, NeMo, torchtitan and the Hugging Face Trainer print their loss,
learning rate, grad norm and speed at every logging interval. One parser per format turns such
a line into a step and values named in the vocabulary (``train.loss``...). A value the line
spells ``nan`` or ``inf`` is kept, because a NaN loss is exactly what detection must see; a
number that does not parse is skipped and counted, never raised. ``auto`` tries every format
and keeps the first one that recognises a line for the rest of that stream.

Lines end at ``\\n`` or ``\\r``: a progress bar redraws itself with ``\\r`` and may not write
a newline for a whole epoch, so each drawing is read as it is finished.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..model import MAX_INT64
from ._lines import _split_rank, clean_line
from ._source import Sample

__all__ = ["LOG_FORMATS", "PARSE_ERRORS", "MetricLines", "StepMetrics"]

#: What ``--parse`` accepts: ``auto`` and one name per format.
LOG_FORMATS = ("auto", "megatron", "deepspeed", "nemo", "torchtitan", "hf")
#: Cumulative count of numbers in metric lines that did not parse (labels ``path`` or ``stream``).
PARSE_ERRORS = "agent.log_parse_errors"

LOSS = "train.loss"
LR = "train.lr"
GRAD_NORM = "train.grad_norm"
STEP_TIME = "train.step_time_s"
TOKENS_PER_S = "train.tokens_per_s"
# Outside the vocabulary's table, which has no names for them; the collector takes any name.
SAMPLES_PER_S = "train.samples_per_s"
TOKENS_PER_S_PER_GPU = "train.tokens_per_s_per_gpu"

_NUMBER_RE = re.compile(
    r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)", re.IGNORECASE
)
_BREAK_RE = re.compile(rb"[\r\n]")
#: A line longer than this is no metrics line: it is dropped rather than held (or searched).
_MAX_LINE_BYTES = 16384


@dataclass(frozen=True, slots=True)
class StepMetrics:
    """The values one line gave for one training step; ``rank`` when a launcher prefixed it."""

    step: int
    values: dict[str, float]
    rank: str | None = None


def _number(text: str | None) -> float | None:
    """The value ``text`` spells (``nan`` and ``inf`` included), or None when it spells none."""
    if text is None:
        return None
    text = text.strip().strip("'\"")
    return float(text) if _NUMBER_RE.fullmatch(text) else None


@dataclass(slots=True)
class _Line:
    """What a parser read from a line of its format; no ``step``: a line of the format that
    holds no training step (an evaluation, a closing summary)."""

    step: int | None = None
    values: dict[str, float] = field(default_factory=dict)
    malformed: int = 0

    def put(self, name: str, text: str | None, scale: float = 1.0) -> None:
        """Keep ``text``'s value under ``name``; count it when it is there but no number."""
        if text is None:
            return
        value = _number(text)
        if value is None:
            self.malformed += 1
        else:
            self.values[name] = value * scale

    def at(self, text: str | None) -> _Line:
        """Take ``text`` as the step; a step that is no count is counted as malformed."""
        value = _number(text)
        if value is None or not math.isfinite(value) or not 0 <= value <= MAX_INT64:
            self.malformed += 1
        else:
            self.step = int(value)
        return self


def _fields(parts: Iterable[str], sep: str) -> dict[str, str]:
    """``key<sep> value`` pieces as a dict; pieces without ``sep`` are left out."""
    found: dict[str, str] = {}
    for part in parts:
        key, seen, value = part.partition(sep)
        if seen:
            found[key.strip()] = value.strip()
    return found


def _first(fields: Mapping[str, str], *keys: str) -> str | None:
    """The value of the first of ``keys`` that ``fields`` has."""
    return next((fields[key] for key in keys if key in fields), None)


class _Format(Protocol):
    name: str

    def parse(self, text: str) -> _Line | None:
        """What ``text`` holds, or None when it is no line of this format."""
        ...


# " [2024-05-01 12:00:00.123456] iteration      100/  500000 | consumed samples: ... |"
_MEGATRON_RE = re.compile(r"\biteration\s+(\d+)\s*/\s*\d+\s*\|(.*)")


class _Megatron:
    """Megatron-LM's ``training_log`` line (and Megatron-DeepSpeed's, with its throughput)."""

    name = "megatron"

    def parse(self, text: str) -> _Line | None:
        if (m := _MEGATRON_RE.search(text)) is None:
            return None
        fields = _fields(m.group(2).split("|"), ":")
        if "consumed samples" not in fields:  # NeMo 2 writes "iteration 97/99 |" too
            return None
        line = _Line().at(m.group(1))
        line.put(LOSS, _first(fields, "lm loss", "loss"))
        line.put(LR, fields.get("learning rate"))
        line.put(GRAD_NORM, fields.get("grad norm"))
        line.put(STEP_TIME, fields.get("elapsed time per iteration (ms)"), 1e-3)
        line.put(SAMPLES_PER_S, fields.get("samples per second"))
        line.put(TOKENS_PER_S_PER_GPU, fields.get("tokens per gpu per second (tgs)"))
        seqlen = _number(fields.get("actual seqlen"))
        if SAMPLES_PER_S in line.values and seqlen is not None:
            line.values[TOKENS_PER_S] = line.values[SAMPLES_PER_S] * seqlen
        nan_iterations = _number(fields.get("number of nan iterations")) or 0.0
        skipped = _number(fields.get("number of skipped iterations")) or 0.0
        if LOSS not in line.values and nan_iterations > 0:
            # the average of a NaN loss is not printed at all: the count is the only trace of it
            line.values[LOSS] = math.nan
        elif line.values.get(LOSS) == 0.0 and skipped > 0:
            del line.values[LOSS]  # every iteration was skipped: 0 is the empty average, no loss
        return line


# "steps: 100 loss: 2.3456 iter time (s): 1.234 samples/sec: 415.600" (pipeline engine)
_DS_PIPE_RE = re.compile(
    r"\bsteps: (\d+) loss: (\S+) (?:.*? )?iter time \(s\): (\S+) samples/sec: (\S+)"
)
# "[Rank 0] step=100, skipped=0, lr=[0.0003, 0.0003], mom=[(0.9, 0.95)]" (the engine)
_DS_LR_RE = re.compile(r"\bstep=(\d+), skipped=\d+, lr=\[([^\],]*)")
# "epoch=0/micro_step=400/global_step=100, RunningAvgSamplesPerSec=..., CurrSamplesPerSec=..."
_DS_TIMER_RE = re.compile(
    r"\bglobal_step=(\d+), RunningAvgSamplesPerSec=\S*,? CurrSamplesPerSec=([^,\s]+)"
)


class _DeepSpeed:
    """DeepSpeed's pipeline-engine progress line, its engine's lr line and its throughput timer."""

    name = "deepspeed"

    def parse(self, text: str) -> _Line | None:
        if m := _DS_PIPE_RE.search(text):
            line = _Line().at(m.group(1))
            line.put(LOSS, m.group(2))
            line.put(STEP_TIME, m.group(3))
            line.put(SAMPLES_PER_S, m.group(4))
            return line
        if m := _DS_LR_RE.search(text):
            line = _Line().at(m.group(1))
            if m.group(2).strip():
                line.put(LR, m.group(2))  # the first parameter group's
            return line
        if m := _DS_TIMER_RE.search(text):
            line = _Line().at(m.group(1))
            line.put(SAMPLES_PER_S, m.group(2))
            return line
        return None


# PyTorch Lightning's bar, NeMo 1.x: "Epoch 0:  10%|█  | 100/1000 [01:40<15:00, 1.00it/s, ...=...]"
_BAR_RE = re.compile(r"\bEpoch \d+:[^\[\]]*\[([^\[\]]*)\]")
# NeMo 2.x: "Training epoch 0, iteration 97/99 | lr: 1.469e-05 | global_step: 97 | ..."
_NEMO2_RE = re.compile(r"\bTraining epoch \d+, iteration (\d+)/\d+((?:\s*\|[^|]*)+)")
_NEMO_LOSS = ("reduced_train_loss", "train_loss", "loss")  # never val_loss
_NEMO_GRAD_NORM = ("grad_norm", "gradient_norm")


class _NeMo:
    """NeMo's progress: the Lightning bar's postfix (NeMo 1.x) or NeMo 2's per-step line."""

    name = "nemo"

    def __init__(self) -> None:
        self._postfix: dict[str, str] | None = None  # the bar's last one, to skip its redraws
        self._last: int | None = None

    def parse(self, text: str) -> _Line | None:
        if m := _NEMO2_RE.search(text):
            fields = _fields(m.group(2).split("|"), ":")
            line = _Line().at(_first(fields, "global_step") or m.group(1))
        elif (m := _BAR_RE.search(text)) and "=" in m.group(1):
            fields = _fields(m.group(1).split(","), "=")
            if fields == self._postfix:
                return _Line()  # the bar redrawn (its clock moved): nothing new
            self._postfix = fields
            line = _Line()
            if (step := fields.get("global_step")) is not None:
                line.step = self._bar_count(step)
                if line.step is None:
                    line.malformed += 1
        else:
            return None
        line.put(LOSS, _first(fields, *_NEMO_LOSS))
        line.put(LR, fields.get("lr"))
        line.put(GRAD_NORM, _first(fields, *_NEMO_GRAD_NORM))
        line.put(STEP_TIME, fields.get("train_step_timing in s"))
        line.put(SAMPLES_PER_S, fields.get("samples/sec"))
        line.put(TOKENS_PER_S_PER_GPU, fields.get("tokens_per_sec_per_gpu"))
        self._last = line.step if line.step is not None else self._last
        return line

    def _bar_count(self, text: str) -> int | None:
        """The step a bar's ``global_step=`` means. The bar writes a number in three significant
        digits when that is shorter (``1.23e+5``), so such a step is taken as the one after the
        last when the rounding allows it."""
        value = _number(text)
        if value is None or not math.isfinite(value) or not 0 <= value <= MAX_INT64:
            return None
        if "e" in text.lower() and self._last is not None and value >= 1:
            tolerance = 10 ** (math.floor(math.log10(value)) - 2) / 2
            if abs(self._last + 1 - value) <= tolerance:
                return self._last + 1
        return round(value)


# "step: 10  loss:  9.8765  grad_norm:  1.2345  memory: 12.34GiB(15.61%)  tps: 1,234  ..."
_TITAN_RE = re.compile(r"(?<!validate )\bstep:\s*(\d+)\s+loss:\s*(\S+)(.*)")
_TITAN_FIELD_RE = re.compile(r"\b(grad_norm|gnorm|lr|tps|wps):\s*(\S+)")


class _Torchtitan:
    """torchtitan's metrics line (its colours are gone by now); ``tps`` is per device."""

    name = "torchtitan"

    def parse(self, text: str) -> _Line | None:
        if (m := _TITAN_RE.search(text)) is None:
            return None
        line = _Line().at(m.group(1))
        line.put(LOSS, m.group(2))
        fields = {k: v for k, v in _TITAN_FIELD_RE.findall(m.group(3))}
        line.put(GRAD_NORM, _first(fields, "grad_norm", "gnorm"))
        line.put(LR, fields.get("lr"))
        throughput = _first(fields, "tps", "wps")
        line.put(TOKENS_PER_S_PER_GPU, None if throughput is None else throughput.replace(",", ""))
        return line


# "{'loss': 2.3456, 'grad_norm': 1.234, 'learning_rate': 4.9e-05, 'epoch': 0.1}"
_HF_DICT_RE = re.compile(r"\{'[^{}]*\}")
_HF_KEY_RE = re.compile(r"'([^']+)':\s*")
# a value printed through a wrapper: tensor(1.2345, device='cuda:0'), np.float64(4.9e-05)
_HF_WRAPPED_RE = re.compile(r"[A-Za-z_][\w.]*\(\s*([^,()]+)(?:,[^()]*)?\)")
_HF_NOT_TRAINING = ("eval_", "test_", "predict_")


class _HuggingFace:
    """The Trainer's log dicts; evaluation dicts and the closing summary are not training steps.

    The dicts carry no step unless a ``step``/``global_step`` key is there; without it the
    step is the line's place among the training dicts (1, 2, 3...).
    """

    name = "hf"

    def __init__(self) -> None:
        self._count = 0

    def parse(self, text: str) -> _Line | None:
        if (m := _HF_DICT_RE.search(text)) is None:
            return None
        fields = _dict_fields(m.group(0))
        if "train_runtime" in fields or any(k.startswith(_HF_NOT_TRAINING) for k in fields):
            return _Line()
        if "loss" not in fields:
            return None
        self._count += 1
        step = _first(fields, "global_step", "step")
        line = _Line().at(step) if step is not None else _Line(step=self._count)
        line.put(LOSS, fields["loss"])
        line.put(GRAD_NORM, fields.get("grad_norm"))
        line.put(LR, fields.get("learning_rate"))
        return line


def _dict_fields(text: str) -> dict[str, str]:
    """The keys of a printed dict and their values' text, wrappers and quotes taken off."""
    keys = list(_HF_KEY_RE.finditer(text))
    fields: dict[str, str] = {}
    for key, following in zip(keys, [*keys[1:], None], strict=True):
        end = following.start() if following is not None else len(text) - 1
        value = text[key.end() : end].strip().rstrip(",").strip()
        if wrapped := _HF_WRAPPED_RE.fullmatch(value):
            value = wrapped.group(1)
        fields[key.group(1)] = value
    return fields


_PARSERS: dict[str, type[_Format]] = {
    "megatron": _Megatron,
    "deepspeed": _DeepSpeed,
    "nemo": _NeMo,
    "torchtitan": _Torchtitan,
    "hf": _HuggingFace,
}


class MetricLines:
    """One stream's metric lines (a file, a command's stdout) in one format: bytes or lines in,
    ``StepMetrics`` out. Not thread-safe: one reader feeds it.

    Args:
        fmt: one of ``LOG_FORMATS``; ``auto`` settles on the first format that recognises a line.
    """

    def __init__(self, fmt: str = "auto") -> None:
        if fmt not in LOG_FORMATS:
            raise ValueError(f"unknown log format {fmt!r}: use one of {', '.join(LOG_FORMATS)}")
        names = list(_PARSERS) if fmt == "auto" else [fmt]
        self._parsers: list[_Format] = [_PARSERS[name]() for name in names]
        #: The format in use; None while ``auto`` has recognised no line yet.
        self.format: str | None = None if fmt == "auto" else fmt
        #: Numbers in recognised lines that did not parse, skipped (cumulative).
        self.malformed = 0
        self._reported = 0
        self._last: dict[str | None, tuple[int, dict[str, float]]] = {}
        self._rest = bytearray()
        self._overlong = False  # the held line outgrew _MAX_LINE_BYTES: drop it to its end

    def push(self, chunk: bytes) -> list[StepMetrics]:
        """Take bytes as they came; return what the lines they finish held."""
        *done, rest = _BREAK_RE.split(chunk)
        found: list[StepMetrics] = []
        for i, part in enumerate(done):
            if i == 0:
                part, overlong = bytes(self._rest) + part, self._overlong
                self._rest.clear()
                self._overlong = False
                if overlong:
                    continue
            found += self.feed(part)
        self._hold(rest)
        return found

    def finish(self) -> list[StepMetrics]:
        """The stream ended (or its file was left): read the unfinished last line too."""
        rest, overlong = bytes(self._rest), self._overlong
        self._rest.clear()
        self._overlong = False
        return [] if overlong or not rest else self.feed(rest)

    def feed(self, line: bytes | str) -> list[StepMetrics]:
        """Read one line, without its line break; ANSI colours and rank prefixes are taken off."""
        rank, text = _split_rank(clean_line(line))
        if not text.strip() or len(text) > _MAX_LINE_BYTES:
            return []
        for parser in self._parsers:
            if (parsed := parser.parse(text)) is not None:
                break
        else:
            return []
        if self.format is None:
            self._parsers, self.format = [parser], parser.name
        self.malformed += parsed.malformed
        if parsed.step is None or not parsed.values:
            return []
        if self._last.get(rank) == (parsed.step, parsed.values):
            return []  # the same line again (printed twice, a bar redrawn)
        self._last[rank] = (parsed.step, parsed.values)
        return [StepMetrics(parsed.step, parsed.values, rank)]

    def samples(self, found: Iterable[StepMetrics], labels: Mapping[str, str]) -> list[Sample]:
        """``found`` as samples at their steps (labelled with their rank, if any), and the count
        of malformed numbers under ``labels`` when it grew since the last call."""
        samples = [
            Sample(name, value, {"rank": m.rank} if m.rank is not None else {}, step=m.step)
            for m in found
            for name, value in m.values.items()
        ]
        if self.malformed != self._reported:
            self._reported = self.malformed
            samples.append(Sample(PARSE_ERRORS, float(self.malformed), dict(labels)))
        return samples

    def _hold(self, part: bytes) -> None:
        if self._overlong:
            return
        self._rest += part
        if len(self._rest) > _MAX_LINE_BYTES:
            self._rest.clear()
            self._overlong = True
