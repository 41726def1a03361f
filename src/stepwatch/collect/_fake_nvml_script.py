"""Fake GPUs from a spec (``fake:4``) and a JSON script of per-GPU overrides.

A script looks like ``{"all": {...}, "gpus": [{...}, {...}]}``: ``all`` applies to
every GPU, entry i of ``gpus`` to GPU i on top of it; keys are ``FakeGpu`` fields.
Error codes may be written as numbers or as NVML names (``"NO_PERMISSION"``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml

from ._fake_nvml_gpu import FakeGpu

__all__ = ["FakeScriptError", "load_script", "parse_spec"]


class FakeScriptError(ValueError):
    """A fake-GPU spec or script that cannot be used; the message says where and why."""


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("a number")
    return float(value)


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("an integer")
    return value


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError("true or false")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("a string")
    return value


def _optional_number(value: Any) -> float | None:
    return None if value is None else _number(value)


def _times(value: Any) -> list[float]:
    if not isinstance(value, list):
        raise TypeError("a list of times in seconds")
    return [_number(v) for v in value]


def _pids(value: Any) -> list[int]:
    if not isinstance(value, list):
        raise TypeError("a list of process ids")
    return [_integer(v) for v in value]


def _xids(value: Any) -> list[tuple[float, int]]:
    if not isinstance(value, list) or not all(isinstance(v, list) and len(v) == 2 for v in value):
        raise TypeError("a list of [seconds, xid code] pairs")
    return [(_number(at), _integer(code)) for at, code in value]


def _error_code(value: Any) -> int:
    if isinstance(value, str):
        code = getattr(pynvml, f"NVML_ERROR_{value.upper()}", None)
        if not isinstance(code, int):
            raise TypeError(f"an NVML error name, not {value!r}")
        return code
    return _integer(value)


def _errors(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        raise TypeError('an object like {"nvmlDeviceGetPowerUsage": "NO_PERMISSION"}')
    return {_text(name): _error_code(code) for name, code in value.items()}


#: How each kind of ``FakeGpu`` field is read from JSON (keyed by its annotation).
_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "str": _text,
    "int": _integer,
    "float": _number,
    "bool": _flag,
    "float | None": _optional_number,
    "list[float]": _times,
    "list[int]": _pids,
    "list[tuple[float, int]]": _xids,
    "dict[str, int]": _errors,
}
_FIELDS = {f.name: _CONVERTERS[str(f.type)] for f in dataclasses.fields(FakeGpu)}


def _overrides(entry: Any, where: str) -> dict[str, Any]:
    """Checked, converted ``FakeGpu`` keyword arguments from one JSON object."""
    if not isinstance(entry, dict):
        raise FakeScriptError(f"{where}: expected an object of FakeGpu fields")
    out = {}
    for key, value in entry.items():
        if key not in _FIELDS:
            known = ", ".join(sorted(_FIELDS))
            raise FakeScriptError(f"{where}: unknown field {key!r}; known fields: {known}")
        try:
            out[key] = _FIELDS[key](value)
        except TypeError as err:
            raise FakeScriptError(f"{where}.{key}: expected {err}, got {value!r}") from None
    return out


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``all`` overrides and the per-GPU overrides of a JSON script, checked."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise FakeScriptError(f"cannot read GPU script {path}: {err.strerror or err}") from None
    except json.JSONDecodeError as err:
        raise FakeScriptError(
            f"GPU script {path} is not JSON: {err.msg} (line {err.lineno}, column {err.colno})"
        ) from None
    if not isinstance(doc, dict) or set(doc) - {"all", "gpus"}:
        raise FakeScriptError(f'GPU script {path}: expected {{"all": {{...}}, "gpus": [...]}}')
    gpus = doc.get("gpus", [])
    if not isinstance(gpus, list):
        raise FakeScriptError(f"GPU script {path}: gpus must be a list, one object per GPU")
    common = _overrides(doc.get("all", {}), f"GPU script {path}: all")
    return common, [_overrides(g, f"GPU script {path}: gpus[{i}]") for i, g in enumerate(gpus)]


def load_script(path: Path, count: int | None = None) -> list[FakeGpu]:
    """The GPUs a JSON script describes: ``count`` of them, or as many as it lists (at least 1)."""
    common, per_gpu = _read(path)
    n = max(1, len(per_gpu)) if count is None else count
    if len(per_gpu) > n:
        raise FakeScriptError(f"GPU script {path} describes {len(per_gpu)} GPUs, more than {n}")
    gpus = []
    for i in range(n):
        try:
            gpus.append(FakeGpu(**(common | (per_gpu[i] if i < len(per_gpu) else {}))))
        except ValueError as err:
            raise FakeScriptError(f"GPU script {path}: GPU {i}: {err}") from None
    return gpus


def _count(spec: str) -> int | None:
    """N from ``fake:N``; None for plain ``fake``."""
    kind, _, count = spec.partition(":")
    if kind != "fake":
        raise FakeScriptError(f"not a fake GPU spec: {spec!r} (use fake or fake:N)")
    if not count:
        return None
    if not count.isdigit() or not 1 <= int(count) <= 64:
        raise FakeScriptError(f"{spec!r}: N in fake:N must be a whole number from 1 to 64")
    return int(count)


def parse_spec(spec: str, script: Path | None = None) -> list[FakeGpu]:
    """The GPUs of ``fake:N`` (N of them) or ``fake`` (one, or as many as the script lists)."""
    count = _count(spec)
    if script is not None:
        return load_script(script, count)
    return [FakeGpu() for _ in range(count or 1)]
