"""The collector started with the StatefulSet's own options (on a loopback port, in a temporary
directory) answers the kubelet's probes and the ServiceMonitor's scrape as the manifests expect."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx

from ._manifests import CommandLine, Obj, containers, one

#: How a kubelet reaches a pod: by its address.
POD = {"Host": "10.1.2.3:7070"}
#: Options the test sets itself: where the store is, where to listen.
_OWN = {"--store", "--host", "--port"}


def _container() -> Obj:
    (container,) = containers(one("StatefulSet"))
    return container


def _manifest_options() -> tuple[str, ...]:
    """The container's `stepwatch server` options but the store path and the address."""
    argv = CommandLine.of(_container()).argv
    assert argv[:2] == ["stepwatch", "server"]
    rest, kept = argv[2:], []
    while rest:
        word = rest.pop(0)
        if word in _OWN:
            rest.pop(0)
        else:
            kept.append(word)
    return tuple(kept)


def test_the_probes_answer_200(collector_factory: Any) -> None:
    collector = collector_factory(auth=True, extra_args=_manifest_options())
    probes = [_container()[k] for k in ("startupProbe", "livenessProbe", "readinessProbe")]
    for probe in probes:
        got = httpx.get(f"{collector.url}{probe['httpGet']['path']}", headers=POD)
        assert got.status_code == 200, (probe, got.text)


def test_the_scrape_needs_the_token_the_servicemonitor_sends(collector_factory: Any) -> None:
    collector = collector_factory(auth=True, extra_args=_manifest_options())
    (endpoint,) = one("ServiceMonitor")["spec"]["endpoints"]
    url = f"{collector.url}{endpoint['path']}"
    assert endpoint["authorization"]["type"] == "Bearer"
    assert httpx.get(url).status_code == 401
    scraped = httpx.get(url, headers=collector.headers_of("viewer"))
    assert scraped.status_code == 200
    assert "\nstepwatch_ready 1.0\n" in scraped.text


def test_agents_reach_it_by_the_service_name(collector_factory: Any) -> None:
    collector = collector_factory(auth=True, extra_args=_manifest_options())
    (agent,) = containers(one("DaemonSet"))
    name = urlsplit(CommandLine.of(agent).env["STEPWATCH_SERVER"]).netloc
    viewer = collector.headers_of("viewer")
    assert httpx.get(f"{collector.url}/metrics", headers={**viewer, "Host": name}).is_success
    elsewhere = {**viewer, "Host": "elsewhere.example.org"}
    assert httpx.get(f"{collector.url}/metrics", headers=elsewhere).status_code == 421
