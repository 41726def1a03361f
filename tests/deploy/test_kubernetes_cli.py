"""Each container of deploy/kubernetes starts a command the stepwatch CLI accepts, with options
that agree with the rest of the manifests: ports, Service names, mounts, the Secret, /metrics."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from urllib.parse import urlsplit

import click
import psutil
import pytest

from stepwatch.collect import AgentOptions
from stepwatch.server import CollectorOptions

from ._cli import parse, run_until_start, unread_env
from ._manifests import CommandLine, Obj, containers, one, pod_spec, workloads

ALL = [(w, c) for w in workloads() for c in containers(w)]


def _line(kind: str) -> CommandLine:
    (container,) = containers(one(kind))
    return CommandLine.of(container)


def test_the_program_is_the_installed_stepwatch_command() -> None:
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="stepwatch")
    assert script.value == "stepwatch.cli:main"


@pytest.mark.parametrize("pair", ALL, ids=lambda p: f"{p[0]['metadata']['name']}/{p[1]['name']}")
def test_the_command_line_parses(pair: tuple[Obj, Obj], monkeypatch: pytest.MonkeyPatch) -> None:
    line = CommandLine.of(pair[1])
    parse(line, monkeypatch)
    assert unread_env(line) == set()


def test_a_wrong_option_fails_the_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    line = _line("StatefulSet")
    with pytest.raises(click.NoSuchOption):
        parse(CommandLine([*line.argv, "--metrics-publik"], line.env), monkeypatch)
    agent = _line("DaemonSet")
    with pytest.raises(click.ClickException, match="--server collector:7070"):
        parse(
            CommandLine(agent.argv, {**agent.env, "STEPWATCH_SERVER": "collector:7070"}),
            monkeypatch,
        )
    assert unread_env(CommandLine(agent.argv, {"STEPWATCH_SERVR": "x"})) == {"STEPWATCH_SERVR"}


def _collector(monkeypatch: pytest.MonkeyPatch) -> tuple[Path, CollectorOptions]:
    store, options = run_until_start(_line("StatefulSet"), monkeypatch)
    return store, options


def _agent(monkeypatch: pytest.MonkeyPatch) -> AgentOptions:
    (options,) = run_until_start(_line("DaemonSet"), monkeypatch)
    return options


def _mounts(workload: Obj) -> dict[str, Obj]:
    (container,) = containers(workload)
    return {m["mountPath"]: m for m in container["volumeMounts"]}


def test_the_collector_listens_on_its_container_port(monkeypatch: pytest.MonkeyPatch) -> None:
    store, options = _collector(monkeypatch)
    collector = one("StatefulSet")
    (container,) = containers(collector)
    (port,) = container["ports"]
    assert options.host == "0.0.0.0" and options.port == port["containerPort"]
    claims = {t["metadata"]["name"] for t in collector["spec"]["volumeClaimTemplates"]}
    assert _mounts(collector)[str(store.parent)]["name"] in claims, "the store is not on the PVC"
    assert options.requires_auth


def _pod_address() -> str:
    """An address of this machine's interfaces, as a pod's IP is of the pod's."""
    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family.name == "AF_INET" and not a.address.startswith("127."):
                return str(a.address)
    pytest.skip("this machine has no address but loopback")


def test_the_collector_answers_to_the_names_it_is_reached_by(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options = _collector(monkeypatch)[1]
    hosts = options.hosts()
    agent_url = _line("DaemonSet").env["STEPWATCH_SERVER"]
    assert hosts.allows(urlsplit(agent_url).netloc), "agents' Host refused"
    assert hosts.allows(f"{_pod_address()}:7070"), "Prometheus scrapes by the pod's address"
    assert not hosts.allows("elsewhere.example.org")


def test_metrics_auth_agrees_with_the_servicemonitor(monkeypatch: pytest.MonkeyPatch) -> None:
    options = _collector(monkeypatch)[1]
    (endpoint,) = one("ServiceMonitor")["spec"]["endpoints"]
    assert options.metrics_public is ("authorization" not in endpoint)


def test_the_agent_sends_to_the_collector_service(monkeypatch: pytest.MonkeyPatch) -> None:
    options = _agent(monkeypatch)
    url = urlsplit(options.server or "")
    service = one("Service", url.hostname.split(".")[0] if url.hostname else None)
    assert service["spec"].get("clusterIP") != "None"
    assert url.hostname in {
        service["metadata"]["name"],
        f"{service['metadata']['name']}.stepwatch.svc",
    }
    assert url.port in {p["port"] for p in service["spec"]["ports"]}
    assert options.token == "secret-agent-token"


def test_the_agent_is_labelled_with_its_node_and_spools_on_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options = _agent(monkeypatch)
    agent = one("DaemonSet")
    assert options.node == "gpu-node-1"  # spec.nodeName through the downward API
    assert options.gpu == "nvml"
    mount = _mounts(agent)[str(options.spool_root)]
    assert not mount.get("readOnly", False)
    volumes = {v["name"]: v for v in pod_spec(agent)["volumes"]}
    assert volumes[mount["name"]]["hostPath"]["path"] == str(options.spool_root)


def test_the_agent_reaches_the_kubelet_s_pod_resources_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The socket the agent asks which pod each GPU is allocated to: its directory mounted
    read-only at its own path, from the node."""
    options = _agent(monkeypatch)
    assert options.pod_resources is not None
    mount = _mounts(one("DaemonSet"))[str(options.pod_resources.parent)]
    assert mount["readOnly"] is True
    volumes = {v["name"]: v for v in pod_spec(one("DaemonSet"))["volumes"]}
    assert volumes[mount["name"]]["hostPath"]["path"] == str(options.pod_resources.parent)


def test_the_agent_serves_nothing_to_probe() -> None:
    """No liveness probe because `stepwatch agent` listens on no port."""
    from stepwatch.cli import main

    agent_command = main.commands["agent"]
    assert not {"--port", "--host"} & {o for p in agent_command.params for o in p.opts}
    (container,) = containers(one("DaemonSet"))
    assert not {"livenessProbe", "readinessProbe", "startupProbe", "ports"} & set(container)
