"""The GPUs' pods from the kubelet's pod-resources API, served by a real gRPC server on a unix
socket with recorded answers: the decoding (checked on bytes written out by hand from the API's
field numbers, so that the test encoder below cannot hide a decoding mistake), the mapping from
GPU UUIDs to pods, the GPU samples' labels through the fake NVML device, and the fall back to the
processes' cgroups when the socket is absent, the kubelet errs, or grpcio is missing."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from stepwatch.collect import FakeGpu, FakeNvml, GpuSource, ManualClock
from stepwatch.collect._pod_resources import (
    LIST_METHOD,
    Allocation,
    PodResources,
    decode_list_response,
    gpu_key,
    gpu_pods,
)
from stepwatch.tsdb._write_request import _field

from .test_pods import CGROUPS, _node

UUID = [f"GPU-{i}b2c3d4e-5f60-7182-93a4-b5c6d7e8f90{i}" for i in range(4)]
TRAINER = {"pod": "trainer-7f9c", "namespace": "ml-team", "container": "pytorch"}

#: ListPodResourcesResponse { pod_resources: [PodResources { name: "trainer-0", namespace: "ml",
#: containers: [ContainerResources { name: "pytorch", devices: [ContainerDevices {
#: resource_name: "nvidia.com/gpu", device_ids: ["GPU-a", "GPU-b"], topology: {nodes: [{ID: 1}]}
#: }], cpu_ids: [2, 3] (packed) }] }] }, tag by tag: (field << 3) | wire type (2: length-delimited,
#: 0: varint), then the length.
RECORDED = (
    b"\x0a\x44"  # pod_resources (1), 68 bytes
    b"\x0a\x09trainer-0"  # name (1)
    b"\x12\x02ml"  # namespace (2)
    b"\x1a\x33"  # containers (3), 51 bytes
    b"\x0a\x07pytorch"  # name (1)
    b"\x12\x24"  # devices (2), 36 bytes
    b"\x0a\x0envidia.com/gpu"  # resource_name (1)
    b"\x12\x05GPU-a"  # device_ids (2)
    b"\x12\x05GPU-b"
    b"\x1a\x04\x0a\x02\x08\x01"  # topology (3): nodes (1): ID (1) = 1
    b"\x1a\x02\x02\x03"  # cpu_ids (3), packed: 2, 3
)


# The kubelet's encoding, for the larger answers: strings and sub-messages are all
# length-delimited fields, which the remote-write encoder writes.
def _devices(resource: str, *ids: str) -> bytes:
    return _field(1, resource.encode()) + b"".join(_field(2, i.encode()) for i in ids)


def _container(name: str, *devices: bytes) -> bytes:
    return _field(1, name.encode()) + b"".join(_field(2, d) for d in devices)


def _pod(name: str, namespace: str, *containers: bytes) -> bytes:
    body = _field(1, name.encode()) + _field(2, namespace.encode())
    return body + b"".join(_field(3, c) for c in containers)


def _response(*pods: bytes) -> bytes:
    return b"".join(_field(1, p) for p in pods)


@dataclass
class Kubelet:
    """A gRPC server on a unix socket answering ``List`` with ``answer`` (bytes, or an
    exception to raise); ``requests`` holds what it was asked."""

    socket: Path
    answer: bytes | Exception = b""
    requests: list[bytes] = field(default_factory=list)

    def list(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            context.abort(grpc.StatusCode.INTERNAL, f"device manager: {self.answer}")
        assert isinstance(self.answer, bytes)
        return self.answer


@pytest.fixture
def kubelet(tmp_path: Path) -> Iterator[Kubelet]:
    socket = tmp_path / "pod-resources" / "kubelet.sock"
    socket.parent.mkdir()
    fake = Kubelet(socket)
    service, method = LIST_METHOD.strip("/").split("/")
    # No (de)serializers: the handler takes and returns the raw protobuf bytes.
    handler = grpc.method_handlers_generic_handler(
        service, {method: grpc.unary_unary_rpc_method_handler(fake.list)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
    assert server.add_insecure_port(f"unix:{socket}") == 1
    server.start()
    yield fake
    server.stop(grace=None).wait()


def test_the_recorded_answer_decodes() -> None:
    assert decode_list_response(RECORDED) == [
        Allocation("trainer-0", "ml", "pytorch", "nvidia.com/gpu", ("GPU-a", "GPU-b"))
    ]
    assert decode_list_response(b"") == []  # no pod on the node
    for broken in (RECORDED[:-1], b"\x0a\x80", b"\x0b"):  # cut short; a bad varint; a group
        with pytest.raises(ValueError):
            decode_list_response(broken)


def test_the_test_encoder_writes_what_the_kubelet_writes() -> None:
    topology = b"\x1a\x04\x0a\x02\x08\x01"
    devices = _devices("nvidia.com/gpu", "GPU-a", "GPU-b") + topology
    container = _container("pytorch", devices) + b"\x1a\x02\x02\x03"
    assert _response(_pod("trainer-0", "ml", container)) == RECORDED


def test_gpu_uuids_map_to_the_pod_container_they_are_allocated_to() -> None:
    mig = "MIG-1c2d3e4f-5a6b-5c7d-8e9f-0a1b2c3d4e5f"
    answer = _response(
        _pod(
            "trainer-7f9c",
            "ml-team",
            _container(
                "pytorch",
                _devices("nvidia.com/gpu", UUID[0], UUID[1]),
                _devices("example.com/fpga", "fpga-0"),  # not a GPU
                _devices("rdma/hca_shared_devices_a", UUID[3]),  # not the GPU plugin's
            ),
            _container("sidecar"),  # no device
        ),
        _pod("eval-2", "research", _container("main", _devices("nvidia.com/mig-1g.10gb", mig))),
        # Old-style MIG names of two MIG devices of one GPU, for two pods: no one pod's GPU.
        _pod("a", "x", _container("c", _devices("nvidia.com/mig-3g.40gb", f"MIG-{UUID[2]}/1/0"))),
        _pod("b", "x", _container("c", _devices("nvidia.com/mig-3g.40gb", f"MIG-{UUID[2]}/2/0"))),
        # Time-sliced replicas: one GPU, one container.
        _pod("nb", "x", _container("c", _devices("nvidia.com/gpu.shared", "GPU-s::0", "GPU-s::3"))),
        _pod("idle", "x"),  # no container asks for a device
    )
    assert len(answer) > 300  # several-byte varint lengths on the way
    gpus = gpu_pods(decode_list_response(answer))
    assert gpus == {
        UUID[0]: TRAINER,
        UUID[1]: TRAINER,
        mig: {"pod": "eval-2", "namespace": "research", "container": "main"},
        "GPU-s": {"pod": "nb", "namespace": "x", "container": "c"},
    }
    assert gpu_key(f"MIG-{UUID[2]}/1/0") == UUID[2]
    assert gpu_key(f"{UUID[1]}::7") == UUID[1]


def test_the_client_asks_the_kubelet_over_its_socket(kubelet: Kubelet) -> None:
    kubelet.answer = RECORDED
    client = PodResources(kubelet.socket)
    assert client.refresh() == {
        "GPU-a": {"pod": "trainer-0", "namespace": "ml", "container": "pytorch"},
        "GPU-b": {"pod": "trainer-0", "namespace": "ml", "container": "pytorch"},
    }
    assert kubelet.requests == [b""]  # ListPodResourcesRequest: no field
    assert client.of("GPU-a") == {"pod": "trainer-0", "namespace": "ml", "container": "pytorch"}
    assert client.of("GPU-c") is None
    client.close()
    client.close()


def _gpus(tmp_path: Path, client: PodResources, clock: ManualClock) -> tuple[FakeNvml, GpuSource]:
    """Four fake GPUs: 0 and 2 run this process (a container of trainer-7f9c, by its cgroup),
    1 and 3 run nothing."""
    me = os.getpid()
    pods = _node(tmp_path / "node", me, CGROUPS["v2 systemd containerd"])
    gpus = [FakeGpu(uuid=UUID[i], pids=[me] if i in (0, 2) else []) for i in range(4)]
    nvml = FakeNvml(gpus, clock=clock)
    source = GpuSource(
        nvml, interval_s=1.0, slow_interval_s=10.0, node_clock=clock, xid_wait_ms=5, pods=pods,
        pod_resources=client,
    )  # fmt: skip
    return nvml, source


def _labels(source: GpuSource) -> dict[str, dict[str, str]]:
    reading = source.read(time.time())
    return {
        dict(s.labels)["gpu"]: {k: v for k, v in s.labels.items() if k != "gpu"}
        for s in reading.samples
        if s.name == "gpu.temp_c"
    }


def test_a_gpu_allocated_to_a_pod_carries_its_labels_before_any_process_runs(
    tmp_path: Path, kubelet: Kubelet
) -> None:
    eval_pod = {"pod": "eval-2", "namespace": "research", "container": "main"}
    trainer = _pod(
        "trainer-7f9c", "ml-team", _container("pytorch", _devices("nvidia.com/gpu", UUID[0]))
    )
    kubelet.answer = _response(
        trainer, _pod("eval-2", "research", _container("main", _devices("nvidia.com/gpu", UUID[1])))
    )
    clock = ManualClock()
    nvml, source = _gpus(tmp_path, PodResources(kubelet.socket), clock)
    with source:
        assert _labels(source) == {
            "0": TRAINER,
            "1": eval_pod,  # allocated, nothing runs on it yet
            "2": TRAINER,  # not allocated by the device plugin: its process's cgroup
            "3": {},
        }
        # Processes are looked up only on the GPUs the kubelet allocated to no one.
        assert nvml.calls["nvmlDeviceGetComputeRunningProcesses"] == 2
        assert len(kubelet.requests) == 1
        # The eval pod ends: seen at the next slow read, not at the fast ones before it.
        kubelet.answer = _response(trainer)
        for _ in range(9):
            clock.advance(1.0)
            assert _labels(source)["1"] == eval_pod
        assert len(kubelet.requests) == 1
        clock.advance(1.0)
        assert _labels(source)["1"] == {}
        assert len(kubelet.requests) == 2


def _fallback(
    tmp_path: Path, client: PodResources, caplog: pytest.LogCaptureFixture
) -> list[logging.LogRecord]:
    """Three slow reads label the GPUs from their processes' cgroups alone; what was logged."""
    clock = ManualClock()
    caplog.set_level(logging.INFO, logger="stepwatch.collect")
    _, source = _gpus(tmp_path, client, clock)
    with source:
        for _ in range(3):
            assert _labels(source) == {"0": TRAINER, "1": {}, "2": TRAINER, "3": {}}
            clock.advance(10.0)
    return [r for r in caplog.records if "pod-resources" in r.getMessage()]


def test_without_the_socket_gpus_are_labelled_from_cgroups_and_it_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    socket = tmp_path / "no-kubelet" / "kubelet.sock"
    (said,) = _fallback(tmp_path, PodResources(socket), caplog)
    assert f"no socket at {socket}" in said.getMessage()
    assert said.levelno == logging.INFO  # the usual case off Kubernetes


def test_a_kubelet_that_errs_leaves_the_cgroup_labels_and_is_said_once(
    tmp_path: Path, kubelet: Kubelet, caplog: pytest.LogCaptureFixture
) -> None:
    kubelet.answer = RuntimeError("checkpoint unreadable")
    (said,) = _fallback(tmp_path, PodResources(kubelet.socket), caplog)
    assert "INTERNAL" in said.getMessage() and "checkpoint unreadable" in said.getMessage()
    assert said.levelno == logging.WARNING
    assert len(kubelet.requests) == 3


def test_a_malformed_answer_is_an_error_too(
    tmp_path: Path, kubelet: Kubelet, caplog: pytest.LogCaptureFixture
) -> None:
    kubelet.answer = RECORDED[:-2]
    (said,) = _fallback(tmp_path, PodResources(kubelet.socket), caplog)
    assert "a malformed answer" in said.getMessage() and said.levelno == logging.WARNING
    assert not [r for r in caplog.records if r.name.startswith("grpc")]


def test_a_socket_nobody_serves_is_an_error_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import socket as sockets

    path = tmp_path / "stale.sock"
    stale = sockets.socket(sockets.AF_UNIX)
    stale.bind(str(path))  # the file is there, nothing listens
    stale.close()
    start = time.monotonic()
    (said,) = _fallback(tmp_path, PodResources(path, timeout_s=0.5), caplog)
    assert "UNAVAILABLE" in said.getMessage()
    assert time.monotonic() - start < 5


def test_without_grpcio_it_is_said_once(
    tmp_path: Path, kubelet: Kubelet, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    kubelet.answer = RECORDED
    monkeypatch.setitem(sys.modules, "grpc", None)  # import grpc raises ImportError
    (said,) = _fallback(tmp_path, PodResources(kubelet.socket), caplog)
    assert "grpcio is not installed" in said.getMessage()
    assert kubelet.requests == []


def test_it_says_when_the_kubelet_answers_again(
    tmp_path: Path, kubelet: Kubelet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="stepwatch.collect")
    client = PodResources(kubelet.socket)
    kubelet.answer = RuntimeError("restarting")
    assert client.refresh() == {} and client.refresh() == {}
    kubelet.answer = RECORDED
    assert set(client.refresh()) == {"GPU-a", "GPU-b"}
    client.refresh()
    messages = [r.getMessage() for r in caplog.records if "pod-resources" in r.getMessage()]
    assert len(messages) == 2 and "answers again" in messages[1]
    client.close()
