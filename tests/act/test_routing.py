"""The notifications file (its errors point at file:line: field), the route tree's decisions,
and the dispatch: grouping a burst, waits and intervals, repeats, resolved messages."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from stepwatch.act import (
    AlertmanagerReceiver,
    Dispatch,
    EmailReceiver,
    Route,
    SlackReceiver,
    WebhookReceiver,
    load_notify_config,
    parse_notify_config,
)
from stepwatch.detect import AlertState, Matcher, RuleError

from ._notify_parts import T0, alert

FULL = """\
external_url: https://stepwatch.example/
receivers:
  - name: oncall
    type: webhook
    url: https://hooks.example/in
    secret: ${HOOK_SECRET}
    timeout: 5s
    retries: 5
    backoff: 500ms
    max_backoff: 1m
    headers:
      X-Team: ml
  - name: chat
    type: slack
    url: https://chat.example/hooks/abc
  - name: mail
    type: email
    smarthost: smtp.example:587
    from: stepwatch@example.org
    to: [ml-oncall@example.org, lead@example.org]
    starttls: true
    username: stepwatch
    password: ${SMTP_PASSWORD}
  - name: am
    type: alertmanager
    url: http://alertmanager:9093
route:
  receiver: chat
  group_by: [kind, run]
  group_wait: 30s
  group_interval: 5m
  repeat_interval: 4h
  routes:
    - receiver: mail
      matchers: ["severity = critical"]
      send_resolved: false
      continue: true
    - receiver: oncall
      matchers: ["kind =~ nonfinite|loss_.*", "run != scratch"]
      group_wait: 0s
    - receiver: am
      matchers: ["kind =~ gpu_.*"]
"""
ENV = {"HOOK_SECRET": "hook-secret", "SMTP_PASSWORD": "pw"}


def test_a_full_file_reads_into_receivers_and_routes() -> None:
    config = parse_notify_config(FULL, "notify.yaml", ENV)
    assert config.external_url == "https://stepwatch.example"
    hook = config.receivers["oncall"]
    assert isinstance(hook, WebhookReceiver)
    assert (hook.url, hook.secret, hook.headers) == (
        "https://hooks.example/in",
        "hook-secret",
        {"X-Team": "ml"},
    )
    assert (hook.timeout_s, hook.retry.retries, hook.retry.backoff_s) == (5.0, 5, 0.5)
    assert hook.retry.max_backoff_s == 60.0
    assert isinstance(config.receivers["chat"], SlackReceiver)
    mail = config.receivers["mail"]
    assert isinstance(mail, EmailReceiver)
    assert (mail.host, mail.port, mail.starttls, mail.password) == ("smtp.example", 587, True, "pw")
    assert mail.to == ("ml-oncall@example.org", "lead@example.org")
    assert isinstance(config.receivers["am"], AlertmanagerReceiver)
    root = config.route
    assert (root.receiver, root.group_wait, root.group_interval) == ("chat", 30.0, 300.0)
    critical, loss, gpu = root.routes
    assert critical.matchers == (Matcher("severity", "critical"),)
    assert (critical.proceed, critical.send_resolved, critical.group_wait) == (True, False, 30.0)
    assert loss.matchers == (
        Matcher("kind", "nonfinite|loss_.*", "=~"),
        Matcher("run", "scratch", "!="),
    )
    assert loss.group_wait == 0.0 and loss.repeat_interval == 4 * 3600.0  # set / inherited
    assert gpu.path == "route.routes[2]"


def test_a_file_is_read_from_disk(tmp_path: Path) -> None:
    path = tmp_path / "notify.yaml"
    path.write_text(FULL)
    assert set(load_notify_config(path, ENV).receivers) == {"oncall", "chat", "mail", "am"}
    with pytest.raises(RuleError, match="cannot read"):
        load_notify_config(tmp_path / "missing.yaml")


HOOK = "receivers:\n  - name: hook\n    type: webhook\n    url: http://h.example\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "n.yaml: the file is empty"),
        ("receivers: [\n", "n.yaml:2: not valid YAML"),
        ("route: {receiver: x}\n", "n.yaml:1: missing required key 'receivers'"),
        (HOOK + "route: {receiver: hook}\nroutes: []\n", "n.yaml:6: unknown key 'routes'"),
        (
            "receivers:\n  - name: x\n    type: pager\nroute: {receiver: x}\n",
            "n.yaml:3: receivers[0].type: unknown receiver type 'pager'; expected one of "
            "alertmanager, email, slack, webhook",
        ),
        (
            "receivers:\n  - name: x\n    type: webhook\nroute: {receiver: x}\n",
            "n.yaml:2: receivers[0]: missing required key 'url'",
        ),
        (
            "receivers:\n  - name: x\n    type: slack\n    url: ftp://x\nroute: {receiver: x}\n",
            "n.yaml:4: receivers[0].url: expected an http:// or https:// URL, got 'ftp://x'",
        ),
        (
            "receivers:\n  - name: x\n    type: slack\n    url: hooks.example/T0/s3cret\n"
            "route: {receiver: x}\n",
            "n.yaml:4: receivers[0].url: expected an http:// or https:// URL, got no scheme",
        ),
        (
            "receivers:\n  - name: x\n    type: slack\n    url: ftp://h/T0/s3cret\n"
            "route: {receiver: x}\n",
            "n.yaml:4: receivers[0].url: expected an http:// or https:// URL, got 'ftp://h/…'",
        ),
        (
            "receivers:\n  - name: x\n    type: webhook\n    url: http://h\n    secret: ${NOPE}\n"
            "route: {receiver: x}\n",
            "n.yaml:5: receivers[0].secret: environment variable NOPE is not set",
        ),
        (
            "receivers:\n  - name: x\n    type: webhook\n    url: http://h\n    timeout: soon\n"
            "route: {receiver: x}\n",
            "n.yaml:5: receivers[0].timeout: expected a duration like 30s, 5m or 1h",
        ),
        (
            "receivers:\n  - name: x\n    type: webhook\n    url: http://h\n    retries: -1\n"
            "route: {receiver: x}\n",
            "n.yaml:5: receivers[0].retries: expected a whole number of at least 0",
        ),
        (
            "receivers:\n  - name: x\n    type: webhook\n    url: http://h\n    colour: red\n"
            "route: {receiver: x}\n",
            "n.yaml:5: receivers[0]: unknown key 'colour'",
        ),
        (
            "receivers:\n  - name: m\n    type: email\n    smarthost: smtp\n    from: a@b\n"
            "    to: c@d\nroute: {receiver: m}\n",
            "n.yaml:4: receivers[0].smarthost: expected HOST:PORT, got 'smtp'",
        ),
        (
            "receivers:\n  - name: m\n    type: email\n    smarthost: smtp:25\n    from: a@b\n"
            "    to: c@d\n    starttls: sometimes\nroute: {receiver: m}\n",
            "n.yaml:7: receivers[0].starttls: expected true or false, got 'sometimes'",
        ),
        (
            HOOK + "  - name: hook\n    type: slack\n    url: http://s\nroute: {receiver: hook}\n",
            "n.yaml:5: receivers[1].name: receiver 'hook' is named twice",
        ),
        (HOOK + "route: {}\n", "n.yaml:5: route: missing required key 'receiver'"),
        (
            HOOK + "route:\n  receiver: nobody\n",
            "n.yaml:6: route.receiver: no receiver named 'nobody' (receivers: hook)",
        ),
        (
            HOOK + "route:\n  receiver: hook\n  matchers: [kind=x]\n",
            "n.yaml:7: route.matchers: the root route takes every alert",
        ),
        (
            HOOK + "route:\n  receiver: hook\n  routes:\n    - matchers: ['kind ~ x']\n",
            "n.yaml:8: route.routes[0].matchers[0]: expected LABEL=VALUE",
        ),
        (
            HOOK + "route:\n  receiver: hook\n  routes:\n    - matchers: ['kind=~(']\n",
            "n.yaml:8: route.routes[0].matchers[0]: bad regular expression",
        ),
        (
            HOOK + "route:\n  receiver: hook\n  routes:\n    - matchers: ['run=~(a)\\1']\n",
            "n.yaml:8: route.routes[0].matchers[0]: bad regular expression '(a)\\\\1'",
        ),
        (
            HOOK + "route:\n  receiver: hook\n  routes:\n    - continue: maybe\n",
            "n.yaml:8: route.routes[0].continue: expected true or false",
        ),
        (
            HOOK + "route:\n  receiver: hook\n  group_wait: 10\n",
            "n.yaml:7: route.group_wait: expected a duration",
        ),
        (
            HOOK + "route:\n  receiver: hook\n  group_by: kind\n",
            "n.yaml:7: route.group_by: expected a list",
        ),
    ],
)
def test_mistakes_name_the_file_line_and_field(text: str, expected: str) -> None:
    with pytest.raises(RuleError) as caught:
        parse_notify_config(text, "n.yaml", {})
    assert str(caught.value).startswith(expected), str(caught.value)
    assert "s3cret" not in str(caught.value)  # a receiver's URL is shown by its host only


def test_every_wrong_receiver_is_reported_in_line_order() -> None:
    text = (
        "receivers:\n"
        "  - {name: a, type: webhook}\n"
        "  - {name: b, type: webhook, url: http://h}\n"
        "  - {name: c, type: pager}\n"
        "external_url: ftp://x\n"
        "route: {receiver: a}\n"
    )
    with pytest.raises(RuleError) as caught:
        parse_notify_config(text, "n.yaml", {})
    assert str(caught.value).splitlines() == [
        "n.yaml:2: receivers[0]: missing required key 'url'",
        "n.yaml:4: receivers[2].type: unknown receiver type 'pager'; expected one of "
        "alertmanager, email, slack, webhook",
        "n.yaml:5: external_url: expected an http:// or https:// URL, got 'ftp://x'",
    ]


def _tree() -> Route:
    return Route(
        "default",
        routes=(
            Route("pager", (Matcher("severity", "critical"),), proceed=True, path="r0"),
            Route(
                "loss",
                (Matcher("kind", "loss_.*", "=~"),),
                path="r1",
                routes=(Route("scratch", (Matcher("run", "scratch"),), path="r1.0"),),
            ),
            Route("also-loss", (Matcher("kind", "loss_spike"),), path="r2"),
            Route("gpu", (Matcher("kind", "gpu_.*", "=~"), Matcher("node", "n9", "!=")), path="r3"),
        ),
    )


@pytest.mark.parametrize(
    ("labels", "receivers"),
    [
        ({"kind": "straggler", "severity": "warning"}, ["default"]),
        ({"kind": "loss_spike", "severity": "warning"}, ["loss"]),  # first match only
        ({"kind": "loss_spike", "severity": "warning", "run": "scratch"}, ["scratch"]),
        ({"kind": "nonfinite", "severity": "critical"}, ["pager"]),  # a match: no fallback
        ({"kind": "loss_spike", "severity": "critical"}, ["pager", "loss"]),
        ({"kind": "gpu_thermal", "severity": "warning", "node": "n1"}, ["gpu"]),
        ({"kind": "gpu_thermal", "severity": "warning", "node": "n9"}, ["default"]),
        ({"kind": "telemetry_gap", "severity": "info"}, []),  # info: a record, not a message
        ({"kind": "gpu_underutilized", "severity": "info", "node": "n1"}, []),
    ],
)
def test_the_route_tree_decides_who_hears_of_an_alert(
    labels: dict[str, str], receivers: list[str]
) -> None:
    assert [r.receiver for r in _tree().find(labels)] == receivers


def test_info_alerts_go_only_where_a_route_asks_for_them_by_severity() -> None:
    gap = {"kind": "telemetry_gap", "severity": "info", "node": "n1"}
    log = Route("log", (Matcher("severity", "info|warning", "=~"),), path="r0")
    tree = Route("default", routes=(log,))
    assert [r.receiver for r in tree.find(gap)] == ["log"]
    below = Route("gaps", (Matcher("kind", "telemetry_gap"),), path="r0.0")
    tree = Route("default", routes=(Route("infra", log.matchers, routes=(below,), path="r0"),))
    assert [r.receiver for r in tree.find(gap)] == ["gaps"]  # asked for above, taken below
    assert [r.receiver for r in tree.find({**gap, "severity": "critical"})] == ["default"]


ROUTE = Route("hook", group_wait=30.0, group_interval=300.0, repeat_interval=3600.0)


def test_grouped_by_kind_and_run_a_burst_of_stragglers_is_one_message_per_run() -> None:
    dispatch = Dispatch(dataclasses.replace(ROUTE, group_by=("kind", "run")))
    for rank in range(64):
        dispatch.add(alert(rank=str(rank)), T0 + rank * 0.1)
    dispatch.add(alert(run="r2", rank="0"), T0 + 1)
    dispatch.add(alert(kind="gpu_thermal", node="n1"), T0 + 1)
    assert dispatch.due(T0 + 29) == []  # the group waits for the rest of its burst
    assert dispatch.next_due() == T0 + 30
    sent = dispatch.due(T0 + 31.5)
    by_group = {tuple(n.group.labels.values()): n for n in sent}
    assert set(by_group) == {("straggler", "r1"), ("straggler", "r2"), ("gpu_thermal", "r1")}
    burst = by_group[("straggler", "r1")]
    assert len(burst.alerts) == 64 and burst.status == "firing"
    assert burst.title == "[FIRING:64] kind=straggler run=r1 (warning)"
    assert dispatch.due(T0 + 100) == []  # nothing new


def test_a_change_waits_for_the_group_interval_and_carries_the_whole_group() -> None:
    dispatch = Dispatch(ROUTE)
    dispatch.add(alert(rank="1"), T0)
    assert len(dispatch.due(T0 + 30)) == 1
    dispatch.add(alert(rank="2"), T0 + 60)
    assert dispatch.due(T0 + 60) == []
    assert dispatch.next_due() == T0 + 330
    (sent,) = dispatch.due(T0 + 330)
    assert sorted(a.labels["rank"] for a in sent.alerts) == ["1", "2"]


def test_a_group_still_firing_is_sent_again_after_the_repeat_interval() -> None:
    dispatch = Dispatch(ROUTE)
    fired = alert()
    dispatch.add(fired, T0)
    assert len(dispatch.due(T0 + 30)) == 1
    assert dispatch.due(T0 + 30 + 3599) == []
    assert dispatch.next_due() == T0 + 30 + 3600
    (again,) = dispatch.due(T0 + 30 + 3600)
    assert again.alerts == (fired,)


def test_an_end_is_told_once_then_the_group_is_gone() -> None:
    dispatch = Dispatch(ROUTE)
    dispatch.add(alert(rank="1"), T0)
    dispatch.add(alert(rank="2"), T0)
    dispatch.due(T0 + 30)
    dispatch.add(alert(rank="1", state=AlertState.RESOLVED), T0 + 400)
    (partly,) = dispatch.due(T0 + 400)
    assert partly.status == "firing"
    assert {a.labels["rank"]: a.state for a in partly.alerts} == {"1": "resolved", "2": "firing"}
    dispatch.add(alert(rank="2", state=AlertState.RESOLVED), T0 + 800)
    (over,) = dispatch.due(T0 + 800)
    assert over.status == "resolved" and over.title.startswith("[RESOLVED:1] ")
    assert [a.labels["rank"] for a in over.alerts] == ["2"]
    assert dispatch.next_due() == float("inf")
    assert dispatch.due(T0 + 10 * 3600) == []  # no repeats of what is over


def test_without_send_resolved_an_end_is_not_told() -> None:
    dispatch = Dispatch(Route("hook", group_wait=0.0, send_resolved=False))
    dispatch.add(alert(), T0)
    assert len(dispatch.due(T0)) == 1
    dispatch.add(alert(state=AlertState.RESOLVED), T0 + 400)
    assert dispatch.due(T0 + 400) == []
    assert dispatch.next_due() == float("inf")


def test_an_alert_that_fired_and_ended_while_the_group_waited_is_still_told() -> None:
    dispatch = Dispatch(Route("hook", group_wait=30.0, send_resolved=False))
    dispatch.add(alert(kind="nonfinite"), T0)
    dispatch.add(alert(kind="nonfinite", state=AlertState.RESOLVED), T0 + 5)
    (sent,) = dispatch.due(T0 + 30)
    assert [a.state for a in sent.alerts] == ["resolved"]


def test_a_resolution_nobody_heard_fire_is_not_sent() -> None:
    dispatch = Dispatch(ROUTE)
    dispatch.add(alert(state=AlertState.RESOLVED), T0)
    assert dispatch.due(T0 + 30) == []


def test_each_matching_route_has_its_own_group_and_receiver() -> None:
    dispatch = Dispatch(_tree(), external_url="http://c:7070")
    dispatch.add(alert(kind="loss_spike", severity="critical"), T0)
    sent = dispatch.due(T0 + 10)
    assert sorted(n.receiver for n in sent) == ["loss", "pager"]
    assert all(n.external_url == "http://c:7070" for n in sent)
    assert len({n.key for n in sent}) == 2


def test_a_shutdown_sends_what_waits_at_once() -> None:
    dispatch = Dispatch(ROUTE)
    dispatch.add(alert(), T0)
    assert len(dispatch.due(T0 + 1, all_groups=True)) == 1


def test_without_grouping_labels_all_alerts_are_one_group() -> None:
    dispatch = Dispatch(Route("hook", group_by=(), group_wait=0.0))
    dispatch.add(alert(kind="straggler"), T0)
    dispatch.add(alert(kind="nonfinite", severity="critical"), T0)
    (sent,) = dispatch.due(T0)
    assert sent.title == "[FIRING:2] (critical)"
    assert sent.common_labels == {"run": "r1"}
