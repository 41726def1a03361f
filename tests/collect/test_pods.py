"""Pod labels of a process, on recorded /proc and /var/log/containers trees: cgroup v1 and v2,
the cgroupfs and systemd drivers, containerd, CRI-O and Docker; nothing outside Kubernetes;
the agent's process samples carry them, and so do the samples of a GPU it computes on."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from stepwatch.collect import FakeGpu, FakeNvml, GpuSource, HostSource
from stepwatch.collect._pods import Pods, container_id

CID = "4b1d6c0f8e2a9d3b7c5e1f0a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c"
OTHER = "9" * 64
POD_UID = "0f3e2a1b-4c5d-6e7f-8091-a2b3c4d5e6f7"
CGROUPS = {
    "v1 cgroupfs": (
        f"12:memory:/kubepods/burstable/pod{POD_UID}/{CID}\n"
        f"11:cpu,cpuacct:/kubepods/burstable/pod{POD_UID}/{CID}\n"
    ),
    "v2 systemd containerd": (
        "0::/kubepods.slice/kubepods-burstable.slice/"
        f"kubepods-burstable-pod{POD_UID.replace('-', '_')}.slice/cri-containerd-{CID}.scope\n"
    ),
    "v2 systemd cri-o": (
        f"0::/kubepods.slice/kubepods-pod{POD_UID.replace('-', '_')}.slice/crio-{CID}.scope\n"
    ),
    "v1 docker": f"4:devices:/kubepods/besteffort/pod{POD_UID}/docker-{CID}.scope\n",
}


def _node(root: Path, pid: int, cgroup: str) -> Pods:
    """A node's tree: the process's cgroup file and the kubelet's log links."""
    (root / "proc" / str(pid)).mkdir(parents=True)
    (root / "proc" / str(pid) / "cgroup").write_text(cgroup)
    logs = root / "var/log/containers"
    logs.mkdir(parents=True, exist_ok=True)
    for name, cid in (
        ("trainer-7f9c_ml-team_pytorch", CID),
        ("trainer-7f9c_ml-team_sidecar", OTHER),
    ):
        target = root / "var/log/pods" / f"{name}.log"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("")
        os.symlink(target, logs / f"{name}-{cid}.log")
    return Pods(root / "proc", logs)


@pytest.mark.parametrize("layout", sorted(CGROUPS))
def test_a_container_s_process_gets_its_pod_namespace_and_container(
    tmp_path: Path, layout: str
) -> None:
    pods = _node(tmp_path, 4242, CGROUPS[layout])
    assert container_id(CGROUPS[layout]) == CID
    assert pods.of(4242) == {"pod": "trainer-7f9c", "namespace": "ml-team", "container": "pytorch"}


def test_outside_kubernetes_or_unreadable_there_are_none(tmp_path: Path) -> None:
    pods = _node(tmp_path, 1, "0::/user.slice/user-1000.slice/session-3.scope\n")
    assert pods.of(1) == {}
    assert pods.of(99) == {}  # no such process
    unnamed = _node(tmp_path / "other", 7, f"0::/kubepods.slice/cri-containerd-{'a' * 64}.scope\n")
    assert unnamed.of(7) == {}  # a container the kubelet keeps no log link of
    assert container_id("0::/docker/" + CID) is None  # Docker alone is not Kubernetes


def test_the_agent_s_process_samples_carry_them(tmp_path: Path) -> None:
    me = os.getpid()
    pods = _node(tmp_path, me, CGROUPS["v2 systemd containerd"])
    host = HostSource(psutil, pids=[me], pods=pods)
    reading = host.read(time.time())
    labels = {s.name: dict(s.labels) for s in reading.samples if s.name.startswith("host.proc_")}
    assert labels["host.proc_rss_bytes"] == {
        "pid": str(me), "pod": "trainer-7f9c", "namespace": "ml-team", "container": "pytorch"
    }  # fmt: skip


def test_a_gpu_s_samples_carry_the_pod_of_the_processes_on_it(tmp_path: Path) -> None:
    me = os.getpid()
    pods = _node(tmp_path, me, CGROUPS["v1 cgroupfs"])
    nvml = FakeNvml([FakeGpu(pids=[me]), FakeGpu(pids=[])])
    with GpuSource(nvml, pods=pods) as gpus:
        reading = gpus.read(time.time())  # the first read is a slow one: it looks
    by_gpu = {dict(s.labels)["gpu"]: dict(s.labels) for s in reading.samples
              if s.name == "gpu.temp_c"}  # fmt: skip
    assert by_gpu["0"] == {"gpu": "0", "pod": "trainer-7f9c", "namespace": "ml-team",
                           "container": "pytorch"}  # fmt: skip
    assert by_gpu["1"] == {"gpu": "1"}  # nothing runs on it
    assert nvml.calls["nvmlDeviceGetComputeRunningProcesses"] == 2
