"""Which pod each GPU is allocated to, from the kubelet's pod-resources API: the ``List`` call of
its ``v1.PodResourcesLister`` gRPC service, on a unix socket on the node. The NVIDIA device
plugin names each GPU it hands out by its UUID (``nvidia.com/gpu``; ``nvidia.com/mig-*`` for
MIG devices), so a GPU allocated to a pod has that pod's labels even before a process of the
pod runs on it, as the DCGM exporter labels it.

The few messages are decoded by hand (no generated code), from the API's field numbers::

    ListPodResourcesResponse { repeated PodResources pod_resources = 1; }
    PodResources             { string name = 1; string namespace = 2;
                               repeated ContainerResources containers = 3; }
    ContainerResources       { string name = 1; repeated ContainerDevices devices = 2; ... }
    ContainerDevices         { string resource_name = 1; repeated string device_ids = 2; ... }

Every other field (CPU IDs, memory, topology, dynamic resources) is skipped. ``grpcio`` is
optional (the ``kubernetes`` extra): without it, or without the socket, or when the kubelet does
not answer, the agent labels GPUs from their processes' cgroups alone and says why once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "KUBELET_SOCKET",
    "Allocation",
    "PodResources",
    "decode_list_response",
    "gpu_pods",
]

log = logging.getLogger("stepwatch.collect")

#: Where the kubelet serves the pod-resources API.
KUBELET_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
LIST_METHOD = "/v1.PodResourcesLister/List"
#: The kubelet's own cap on a pod-resources message (gRPC's default, 4 MiB, is less).
MAX_MESSAGE_BYTES = 16 << 20

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
#: A GPU replica under the device plugin's time-slicing: ``GPU-<uuid>::<n>``.
_REPLICA = re.compile(r"::\d+$")
#: A MIG device as older drivers name it: ``MIG-GPU-<uuid>/<gi>/<ci>``, within its GPU's UUID.
_OLD_MIG = re.compile(r"^MIG-(GPU-[0-9a-fA-F-]+)/\d+/\d+$")


@dataclass(frozen=True, slots=True)
class Allocation:
    """Devices of one resource that the kubelet allocated to one container of a pod."""

    pod: str
    namespace: str
    container: str
    resource_name: str
    device_ids: tuple[str, ...]

    @property
    def labels(self) -> dict[str, str]:
        return {"pod": self.pod, "namespace": self.namespace, "container": self.container}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at ``data[at:]`` and the offset after it."""
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("truncated or overlong varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, bytes]]:
    """``(field number, payload)`` of each length-delimited field of a message; the fields of
    the other wire types (numbers) are stepped over, since the messages read here need none."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            _, at = _varint(data, at)
        elif wire == _FIXED64:
            at += 8
        elif wire == _FIXED32:
            at += 4
        elif wire == _LEN:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ValueError(f"field {number} runs past the end of its message")
            yield number, data[at : at + size]
            at += size
        else:
            raise ValueError(f"field {number} has wire type {wire}, which proto3 never writes")
        if at > len(data):
            raise ValueError(f"field {number} runs past the end of its message")


def _text(payload: bytes) -> str:
    return payload.decode("utf-8", errors="replace")


def decode_list_response(data: bytes) -> list[Allocation]:
    """Every device allocation of a ``ListPodResourcesResponse``, in its order.

    Raises:
        ValueError: the bytes are not a well-formed protobuf message.
    """
    out = []
    for number, pod in _fields(data):
        if number != 1:
            continue
        name = namespace = ""
        containers = []
        for field, payload in _fields(pod):
            if field == 1:
                name = _text(payload)
            elif field == 2:
                namespace = _text(payload)
            elif field == 3:
                containers.append(payload)
        for container in containers:
            cname, devices = "", []
            for field, payload in _fields(container):
                if field == 1:
                    cname = _text(payload)
                elif field == 2:
                    devices.append(payload)
            for device in devices:
                resource, ids = "", []
                for field, payload in _fields(device):
                    if field == 1:
                        resource = _text(payload)
                    elif field == 2:
                        ids.append(_text(payload))
                out.append(Allocation(name, namespace, cname, resource, tuple(ids)))
    return out


def _is_gpu(resource_name: str) -> bool:
    """A resource of the NVIDIA device plugin: whole GPUs (also shared ones, renamed
    ``nvidia.com/gpu.shared``) and MIG devices."""
    return (
        resource_name == "nvidia.com/gpu"
        or resource_name.startswith("nvidia.com/gpu.")
        or resource_name.startswith("nvidia.com/mig-")
    )


def gpu_key(device_id: str) -> str:
    """The UUID that names the GPU of a device ID: a time-sliced replica's GPU, an old-style
    MIG device's GPU; any other ID (a GPU's UUID, a MIG device's own) as it is."""
    device_id = _REPLICA.sub("", device_id)
    old_mig = _OLD_MIG.match(device_id)
    return old_mig.group(1) if old_mig else device_id


def gpu_pods(allocations: list[Allocation]) -> dict[str, dict[str, str]]:
    """GPU (or MIG device) UUID → the ``pod``, ``namespace`` and ``container`` it is allocated
    to. Other resources are left out, and so is a GPU allocated to several containers (shared
    or cut into MIG devices), which no one pod's labels describe."""
    holders: dict[str, set[tuple[str, str, str]]] = {}
    for a in allocations:
        if _is_gpu(a.resource_name):
            for device_id in a.device_ids:
                key = gpu_key(device_id)
                holders.setdefault(key, set()).add((a.pod, a.namespace, a.container))
    return {
        key: {"pod": pod, "namespace": namespace, "container": container}
        for key, found in holders.items()
        if len(found) == 1
        for pod, namespace, container in found
    }


class PodResources:
    """The GPUs' pods from the kubelet's pod-resources socket at ``path``, read again at each
    ``refresh`` (the GPU source's slow reads) with ``timeout_s`` to answer.

    Any failure (no grpcio, no socket, an error or a malformed answer) leaves the mapping empty,
    so that the GPUs are labelled from their processes' cgroups; the reason is logged once, and
    again only when it changes.
    """

    def __init__(self, path: Path = KUBELET_SOCKET, *, timeout_s: float = 1.0) -> None:
        self.path, self.timeout_s = Path(path), timeout_s
        self._channel: Any = None
        self._list: Any = None
        self._why: str | None = None
        #: GPU (or MIG device) UUID → pod labels, as of the last refresh.
        self.gpus: dict[str, dict[str, str]] = {}

    def of(self, uuid: str) -> dict[str, str] | None:
        """The labels of the one pod container that ``uuid`` is allocated to, or None."""
        found = self.gpus.get(uuid)
        return dict(found) if found is not None else None

    def refresh(self) -> dict[str, dict[str, str]]:
        """Ask the kubelet again; the new mapping (empty when it cannot be read)."""
        try:
            allocations = self._call()
        except _Unavailable as why:
            self.gpus = {}
            self._say(str(why), quiet=why.quiet)
            return self.gpus
        if self._why is not None:
            log.info("pod-resources: %s answers again", self.path)
            self._why = None
        self.gpus = gpu_pods(allocations)
        return self.gpus

    def _call(self) -> list[Allocation]:
        if not self.path.exists():
            self.close()
            raise _Unavailable(f"no socket at {self.path}", quiet=True)
        if self._list is None:
            self._connect()
        try:
            answer = self._list(b"", timeout=self.timeout_s)
        except Exception as err:  # grpc.RpcError, whose import is optional
            code = getattr(err, "code", None)
            details = getattr(err, "details", None)
            if callable(code) and callable(details):
                raise _Unavailable(f"{self.path}: {code().name}: {details()}") from err
            raise
        try:
            return decode_list_response(answer)
        except ValueError as err:
            raise _Unavailable(f"{self.path}: a malformed answer: {err}") from err

    def _connect(self) -> None:
        try:
            import grpc
        except ImportError:
            raise _Unavailable(
                "grpcio is not installed (pip install 'stepwatch[kubernetes]')"
            ) from None
        self._channel = grpc.insecure_channel(
            f"unix:{self.path.absolute()}",
            options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)],
        )
        # The answer's bytes are decoded after the call, not by gRPC's deserializer hook,
        # which would log a traceback of a malformed answer at every read.
        self._list = self._channel.unary_unary(
            LIST_METHOD,
            request_serializer=lambda _: b"",  # ListPodResourcesRequest has no fields
            response_deserializer=bytes,
        )

    def _say(self, why: str, quiet: bool) -> None:
        if why != self._why:
            self._why = why
            level = logging.INFO if quiet else logging.WARNING
            log.log(level, "pod-resources: %s; GPUs labelled from their processes' cgroups", why)

    def close(self) -> None:
        """Close the channel (a later refresh opens another); idempotent."""
        channel, self._channel, self._list = self._channel, None, None
        if channel is not None:
            channel.close()


class _Unavailable(Exception):
    """The pod-resources API cannot be read now; ``quiet`` when that is the normal case (not on
    Kubernetes: no socket)."""

    def __init__(self, why: str, quiet: bool = False) -> None:
        super().__init__(why)
        self.quiet = quiet
