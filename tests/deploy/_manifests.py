"""deploy/kubernetes read as the tests check it: its objects, their containers, and a
container's command line as Kubernetes would run it (``$(VAR)`` expanded from its env)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DIR = ROOT / "deploy" / "kubernetes"
KUSTOMIZATION = DIR / "kustomization.yaml"
#: Templates to copy, never applied with the rest (their placeholders would win).
EXAMPLES = "*.example.yaml"
#: What a downward-API or Secret value stands for when a test needs a value.
STAND_INS = {"spec.nodeName": "gpu-node-1"}
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")

Obj = dict[str, Any]


def load(path: Path) -> list[Obj]:
    """Every object of a YAML file (one per document)."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def manifest_files() -> list[Path]:
    """The files kustomization.yaml lists, as paths."""
    return [DIR / name for name in yaml.safe_load(KUSTOMIZATION.read_text())["resources"]]


def example_files() -> list[Path]:
    return sorted(DIR.glob(EXAMPLES))


def objects() -> list[Obj]:
    """What ``kubectl apply -k`` applies, before kustomize's own edits."""
    return [obj for path in manifest_files() for obj in load(path)]


def one(kind: str, name: str | None = None) -> Obj:
    """The single object of ``kind`` (and ``name``) among the applied ones."""
    found = [o for o in objects() if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"{len(found)} {kind} objects named {name}"
    return found[0]


def pod_spec(workload: Obj) -> Obj:
    return dict(workload["spec"]["template"]["spec"])


def containers(workload: Obj) -> list[Obj]:
    spec = pod_spec(workload)
    return [*spec.get("initContainers", []), *spec["containers"]]


def workloads() -> Iterator[Obj]:
    for obj in objects():
        if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet"):
            yield obj


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """Whether a matchLabels-style selector picks an object with ``labels``."""
    return all(labels.get(k) == v for k, v in selector.items())


@dataclass(frozen=True)
class CommandLine:
    """A container's command and args as the kubelet expands them, and the environment the
    process starts with (a Secret's value or a downward-API field as a stand-in)."""

    argv: list[str]
    env: dict[str, str]

    @classmethod
    def of(cls, container: Obj) -> CommandLine:
        env = {e["name"]: _value(e) for e in container.get("env", [])}
        argv = [*container.get("command", []), *container.get("args", [])]
        return cls([_expand(a, env) for a in argv], env)


def _value(var: Obj) -> str:
    if "value" in var:
        return str(var["value"])
    source = var["valueFrom"]
    if "fieldRef" in source:
        return STAND_INS[source["fieldRef"]["fieldPath"]]
    if "secretKeyRef" in source:
        return f"secret-{source['secretKeyRef']['key']}"
    raise AssertionError(f"env {var['name']}: a source the tests do not know: {source}")


def _expand(arg: str, env: dict[str, str]) -> str:
    """``$(NAME)`` as the kubelet replaces it; one it cannot is an error here (the kubelet
    would pass it on literally, which is never what was meant)."""

    def sub(m: re.Match[str]) -> str:
        assert m.group(1) in env, f"{arg}: $({m.group(1)}) is not in the container's env"
        return env[m.group(1)]

    return _VAR.sub(sub, arg)
