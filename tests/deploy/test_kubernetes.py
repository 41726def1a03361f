"""deploy/kubernetes as Kubernetes and the Prometheus Operator would take it: every core object
valid against the API's schema (unknown fields refused), kustomization.yaml listing exactly the
manifests, selectors, ports, Secrets and mounts that point at things that exist."""

from __future__ import annotations

import copy
import inspect
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from stepwatch.collect._pods import Pods

from ._manifests import (
    DIR,
    KUSTOMIZATION,
    ROOT,
    Obj,
    containers,
    example_files,
    load,
    manifest_files,
    matches,
    objects,
    one,
    pod_spec,
    workloads,
)

#: A recent Kubernetes release whose schema kubernetes-validate ships.
KUBERNETES = "1.35.0"
NAMESPACE = "stepwatch"
#: Fields of a ServiceMonitor endpoint in monitoring.coreos.com/v1 that these manifests may use.
ENDPOINT_FIELDS = {"port", "path", "scheme", "interval", "scrapeTimeout", "authorization"}


def _core(objs: list[Obj]) -> list[Obj]:
    """Objects of the Kubernetes API itself: the core group (``v1``), groups without a dot
    (``apps/v1``) and ``*.k8s.io``; a CRD's objects (the ServiceMonitor) are not in its schema."""
    groups = [o["apiVersion"].rpartition("/")[0] for o in objs]
    return [o for o, g in zip(objs, groups, strict=True) if "." not in g or g.endswith(".k8s.io")]


ALL = _core(objects()) + _core([o for p in example_files() for o in load(p)])


def test_kustomization_lists_every_manifest_and_nothing_else() -> None:
    listed = [p.name for p in manifest_files()]
    assert len(listed) == len(set(listed)), "a file listed twice"
    assert all((DIR / name).is_file() for name in listed), "a listed file is missing"
    examples = {p.name for p in example_files()}
    present = {p.name for p in DIR.glob("*.yaml")} - {KUSTOMIZATION.name} - examples
    assert set(listed) == present
    assert examples == {"secret.example.yaml"}, "only templates are left out"
    assert not set(listed) & examples


def test_the_image_is_named_in_one_place() -> None:
    images = yaml.safe_load(KUSTOMIZATION.read_text())["images"]
    assert [i["name"] for i in images] == ["stepwatch"]
    for workload in workloads():
        assert {c["image"] for c in containers(workload)} == {"stepwatch"}


@pytest.mark.parametrize("obj", ALL, ids=lambda o: f"{o['kind']}/{o['metadata']['name']}")
def test_the_object_is_valid_kubernetes(obj: Obj) -> None:
    kubernetes_validate.validate(obj, KUBERNETES, strict=True)


def test_validation_refuses_an_unknown_field() -> None:
    broken = copy.deepcopy(one("StatefulSet"))
    broken["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)


def test_everything_is_in_the_namespace() -> None:
    assert yaml.safe_load(KUSTOMIZATION.read_text())["namespace"] == NAMESPACE
    assert one("Namespace")["metadata"]["name"] == NAMESPACE
    for obj in objects() + [o for p in example_files() for o in load(p)]:
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["metadata"]["name"]


@pytest.mark.parametrize("workload", list(workloads()), ids=lambda w: w["metadata"]["name"])
def test_the_selector_picks_the_pod_template(workload: Obj) -> None:
    selector = workload["spec"]["selector"]
    assert set(selector) == {"matchLabels"}
    assert matches(selector["matchLabels"], workload["spec"]["template"]["metadata"]["labels"])
    others = [w for w in workloads() if w["metadata"] != workload["metadata"]]
    assert len(others) == len(list(workloads())) - 1
    for other in others:
        labels = other["spec"]["template"]["metadata"]["labels"]
        assert not matches(selector["matchLabels"], labels), "two workloads share pods"


def _pods_of(service: Obj) -> list[Obj]:
    """The workloads whose pods a Service selects."""
    selector = service["spec"]["selector"]
    return [
        w for w in workloads() if matches(selector, w["spec"]["template"]["metadata"]["labels"])
    ]


def _container_ports(workload: Obj) -> dict[Any, int]:
    """Each container port by name and by number."""
    ports: dict[Any, int] = {}
    for container in containers(workload):
        for port in container.get("ports", []):
            ports[port["containerPort"]] = port["containerPort"]
            if "name" in port:
                ports[port["name"]] = port["containerPort"]
    return ports


@pytest.mark.parametrize(
    "service", [o for o in objects() if o["kind"] == "Service"], ids=lambda s: s["metadata"]["name"]
)
def test_the_service_targets_ports_its_pods_expose(service: Obj) -> None:
    (workload,) = _pods_of(service)
    exposed = _container_ports(workload)
    for port in service["spec"]["ports"]:
        assert port.get("targetPort", port["port"]) in exposed, port


def test_the_statefulset_is_governed_by_the_headless_service() -> None:
    collector = one("StatefulSet")
    headless = one("Service", collector["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert _pods_of(headless) == [collector]
    claims = {t["metadata"]["name"] for t in collector["spec"]["volumeClaimTemplates"]}
    (container,) = containers(collector)
    assert claims <= {m["name"] for m in container["volumeMounts"]}


def test_probes_call_a_port_of_their_container() -> None:
    for workload in workloads():
        for container in containers(workload):
            ports = _container_ports({"spec": {"template": {"spec": {"containers": [container]}}}})
            for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
                if kind in container:
                    assert container[kind]["httpGet"]["port"] in ports, (container["name"], kind)


def test_the_collector_runs_locked_down() -> None:
    collector = one("StatefulSet")
    assert pod_spec(collector)["securityContext"]["runAsNonRoot"] is True
    for container in containers(collector):
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert {"readinessProbe", "livenessProbe"} <= set(container)


def test_every_container_has_requests_and_a_memory_limit() -> None:
    for workload in workloads():
        for container in containers(workload):
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]), container["name"]
            assert "memory" in resources["limits"], container["name"]


def _default(parameter: str) -> Path:
    return Path(inspect.signature(Pods).parameters[parameter].default)


def test_the_agent_sees_what_pod_labelling_reads() -> None:
    """Pods reads /proc/<pid>/cgroup (the node's with hostPID: a hostPath over /proc is refused
    by runtimes) and lists the kubelet's links, which point into /var/log/pods."""
    agent = one("DaemonSet")
    spec = pod_spec(agent)
    assert _default("proc") == Path("/proc") and spec["hostPID"] is True
    (container,) = containers(agent)
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    for path in (str(_default("logs")), "/var/log/pods"):
        assert mounts[path]["readOnly"] is True
        assert volumes[mounts[path]["name"]]["hostPath"]["path"] == path
    assert "/proc" not in mounts


def test_the_agent_reaches_nvml_on_every_gpu_node() -> None:
    agent = one("DaemonSet")
    (container,) = containers(agent)
    env = {e["name"]: e for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert "utility" in env["NVIDIA_DRIVER_CAPABILITIES"]["value"].split(",")
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    tolerated = {t["key"]: t for t in pod_spec(agent)["tolerations"]}
    assert tolerated["nvidia.com/gpu"]["operator"] == "Exists"
    assert "nvidia.com/gpu" not in container["resources"].get("limits", {}), "would take a GPU"


def _service_monitor() -> Obj:
    monitor = one("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    return monitor


def test_the_servicemonitor_scrapes_the_collector_service_once() -> None:
    monitor = _service_monitor()
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = [o for o in objects() if o["kind"] == "Service"]
    (picked,) = [s for s in services if matches(selector, s["metadata"]["labels"])]
    assert picked["spec"].get("clusterIP") != "None"
    assert _pods_of(picked) == [one("StatefulSet")]
    named = {p["name"] for p in picked["spec"]["ports"] if "name" in p}
    for endpoint in monitor["spec"]["endpoints"]:
        assert set(endpoint) <= ENDPOINT_FIELDS, set(endpoint) - ENDPOINT_FIELDS
        assert endpoint["port"] in named
        assert endpoint["path"] == "/metrics"


def _secret() -> Obj:
    (secret,) = [o for p in example_files() for o in load(p) if o["kind"] == "Secret"]
    return secret


def test_every_secret_reference_is_a_key_of_the_secret_template() -> None:
    secret = _secret()
    keys = set(secret["stringData"])
    refs = []
    for workload in workloads():
        for container in containers(workload):
            for var in container.get("env", []):
                if "secretKeyRef" in var.get("valueFrom", {}):
                    refs.append(var["valueFrom"]["secretKeyRef"])
    for endpoint in _service_monitor()["spec"]["endpoints"]:
        if "authorization" in endpoint:
            refs.append(endpoint["authorization"]["credentials"])
    assert refs
    assert {(r["name"], r["key"]) for r in refs} == {(secret["metadata"]["name"], k) for k in keys}


def test_the_secret_template_says_how_to_make_the_real_one() -> None:
    path, secret = example_files()[0], _secret()
    literal = set(re.findall(r"--from-literal=([\w-]+)=", path.read_text()))
    assert literal == set(secret["stringData"])
    assert f"create secret generic {secret['metadata']['name']}" in path.read_text()


def test_the_operations_guide_names_every_file() -> None:
    guide = (ROOT / "docs" / "operations.md").read_text()
    section = guide.split("## Deploying on Kubernetes", 1)[1]
    for path in [*manifest_files(), *example_files(), KUSTOMIZATION]:
        assert f"`{path.name}`" in section, path.name
