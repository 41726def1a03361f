"""The live detector's state as bytes: a restricted pickle, stamped with its format and release.

Why a pickle and not explicit state dicts: the state is a graph of some twenty
kinds of objects (every detector type, lifecycles, member groups, absence,
dedup counts, log rules, both time-order buffers, open and recently resolved
alerts), and a hand-written dict per class would be a second description of
each, to keep in step with the code by hand and to get wrong on the rarely
taken path. A pickle of the objects themselves round-trips exactly what runs.

Why it is safe to read back: the unpickler resolves only classes of the
detection package, of the policy language (a rule set carries its policies
section) and of the shared model, numpy's array and scalar
reconstructors and a few plain containers, so a tampered store can build
objects but never call anything else. What belongs to this life rather than
to the state (the detector constructors, the wall clock, compiled RE2
patterns) travels by name and is supplied again on reading.

Why the release stamp: pickled attributes follow the code, so a checkpoint
written by another release is refused (ValueError) rather than half-read;
the collector then starts cold and adopts the alerts the store holds firing.
"""

from __future__ import annotations

import io
import json
import pickle
from collections.abc import Mapping
from typing import Any

import numpy as np

from ... import __version__
from ..._regex import compile_regex

__all__ = ["FORMAT", "dumps", "loads"]

#: The layout of the state; a checkpoint of another format is not read (2: the classes live in
#: the subpackages of detect, so those a checkpoint of format 1 names are gone).
FORMAT = 2
_MAGIC = b"stepwatch-detection"

_REGEX_TYPE = type(compile_regex("x"))
_PACKAGES = ("stepwatch.detect.", "stepwatch.act._policies", "stepwatch.model")
_ALLOWED: frozenset[tuple[str, str]] = frozenset(
    [(f"numpy{m}.multiarray", n) for m in ("._core", ".core") for n in ("_reconstruct", "scalar")]
    + [(f"numpy{m}.numeric", "_frombuffer") for m in ("._core", ".core")]
    + [("numpy", "dtype"), ("numpy", "ndarray")]
    + [("builtins", n) for n in ("set", "frozenset", "slice", "complex", "bytearray")]
    + [("collections", n) for n in ("deque", "OrderedDict", "defaultdict")]
)  # fmt: skip


class _Pickler(pickle.Pickler):
    def __init__(self, out: io.BytesIO, env: Mapping[str, object]) -> None:
        super().__init__(out, protocol=5)
        self._names = {id(obj): name for name, obj in env.items()}

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, _REGEX_TYPE):
            return ("regex", getattr(obj, "pattern"))  # noqa: B009 (RE2 has no stub)
        name = self._names.get(id(obj))
        return None if name is None else ("env", name)


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: io.BytesIO, env: Mapping[str, object]) -> None:
        super().__init__(data)
        self._env = env

    def persistent_load(self, pid: Any) -> Any:
        kind, name = pid
        if kind == "regex":
            return compile_regex(name)
        if kind == "env" and name in self._env:
            return self._env[name]
        raise pickle.UnpicklingError(f"the state names {pid!r}, which this collector lacks")

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if module.startswith(_PACKAGES) or module in _PACKAGES:
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found
        if module == "numpy.dtypes":
            found = super().find_class(module, name)
            if isinstance(found, type) and issubclass(found, np.dtype):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a detector's state")


def dumps(state: Mapping[str, Any], env: Mapping[str, object]) -> bytes:
    """The state, behind a header naming its format and the release that wrote it."""
    header = json.dumps({"format": FORMAT, "release": __version__}).encode()
    out = io.BytesIO()
    out.write(_MAGIC + b" " + header + b"\n")
    _Pickler(out, env).dump(dict(state))
    return out.getvalue()


def loads(blob: bytes, env: Mapping[str, object]) -> dict[str, Any]:
    """The state ``dumps`` wrote; ValueError for another format or release, or a broken blob."""
    first, _, body = blob.partition(b"\n")
    magic, _, header = first.partition(b" ")
    try:
        stamp = json.loads(header) if magic == _MAGIC else None
    except ValueError:
        stamp = None
    if not isinstance(stamp, dict):
        raise ValueError("not a checkpoint of the live detector")
    if stamp.get("format") != FORMAT or stamp.get("release") != __version__:
        raise ValueError(
            f"checkpoint of format {stamp.get('format')} by release {stamp.get('release')}; "
            f"this collector reads format {FORMAT} of release {__version__}"
        )
    try:
        state = _Unpickler(io.BytesIO(body), env).load()
    except Exception as exc:  # a broken pickle fails in any number of ways
        raise ValueError(f"the checkpoint of the live detector is broken: {exc}") from exc
    if not isinstance(state, dict):
        raise ValueError("the checkpoint of the live detector holds no state")
    return state
