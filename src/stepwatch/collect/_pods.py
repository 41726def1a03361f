"""Which Kubernetes pod and container a process runs in, to label what the agent reads of it
as the DCGM exporter labels GPUs (``pod``, ``namespace``, ``container``): the container's ID
is the last part of the process's cgroup path under ``kubepods`` (cgroup v1 and v2, the
cgroupfs and systemd drivers, containerd, CRI-O and Docker), and the kubelet's log links,
``/var/log/containers/<pod>_<namespace>_<container>-<id>.log``, name it. Outside Kubernetes
a process has no such labels.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["Pods", "container_id"]

#: A container's ID at the end of a kubepods cgroup path: bare (cgroupfs driver) or in a
#: systemd scope named after the runtime.
_ID = re.compile(r"(?:(?:cri-containerd|crio|docker|containerd)-)?([0-9a-f]{64})(?:\.scope)?$")
#: The kubelet's link to a container's log.
_LINK = re.compile(r"^([^_]+)_([^_]+)_(.+)-([0-9a-f]{64})\.log$")


def container_id(cgroup: str) -> str | None:
    """The ID of the Kubernetes container of a process, from its ``/proc/<pid>/cgroup``."""
    for line in cgroup.splitlines():
        path = line.split(":", 2)[-1]
        if "kubepods" not in path:
            continue
        found = _ID.search(path.rstrip("/").rsplit("/", 1)[-1])
        if found:
            return found.group(1)
    return None


class Pods:
    """Pod labels of processes: ``proc`` and ``logs`` are the node's ``/proc`` and
    ``/var/log/containers`` (a recorded tree in tests). A container's names are looked up in
    the log links when first asked for, and the links read again for one not seen yet."""

    def __init__(
        self, proc: Path = Path("/proc"), logs: Path = Path("/var/log/containers")
    ) -> None:
        self._proc, self._logs = proc, logs
        self._names: dict[str, dict[str, str]] = {}

    def of(self, pid: int) -> dict[str, str]:
        """``pod``, ``namespace`` and ``container`` of ``pid``; empty outside Kubernetes or
        when the process or its container's names cannot be read."""
        try:
            cid = container_id((self._proc / str(pid) / "cgroup").read_text())
        except OSError:
            return {}
        if cid is None:
            return {}
        if cid not in self._names:
            self._names = self._links()
        return dict(self._names.get(cid, {}))

    def _links(self) -> dict[str, dict[str, str]]:
        """Every container the kubelet keeps a log link of, by ID (the containers of the pods
        on this node now: the listing is as large as the node's pods, whatever the history)."""
        try:
            names = [p.name for p in self._logs.iterdir()]
        except OSError:
            return {}
        out = {}
        for name in names:
            found = _LINK.match(name)
            if found:
                pod, namespace, container, cid = found.groups()
                out[cid] = {"pod": pod, "namespace": namespace, "container": container}
        return out
