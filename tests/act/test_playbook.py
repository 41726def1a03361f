"""The playbooks file (allow-list) and the argv an entry becomes: precise errors, labels that
stay one argument, Ansible variables that are never templated."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepwatch.act import Playbook, PlaybookError, load_playbooks, parse_playbooks
from stepwatch.detect import RuleError

GOOD = """\
playbooks:
  - name: restart_gpu_services
    kind: command
    argv: [systemctl, restart, "gpu-services@{node}-{gpu}"]
    destructive: false
    dry_run: false
    timeout: 90s
    triggers: [gpu_xid, gpu_thermal]
  - name: drain_node
    kind: ansible
    playbook: plays/drain.yml
    vars: {reason: "alert on {node}"}
    description: Take the node out of the scheduler.
    approvals: 2
"""


def test_a_playbooks_file_reads_into_its_entries(tmp_path: Path) -> None:
    path = tmp_path / "playbooks.yaml"
    path.write_text(GOOD)
    playbooks = load_playbooks(path)
    restart, drain = playbooks
    assert restart == Playbook(
        name="restart_gpu_services",
        kind="command",
        argv=("systemctl", "restart", "gpu-services@{node}-{gpu}"),
        destructive=False,
        dry_run=False,
        timeout_s=90.0,
        triggers=("gpu_xid", "gpu_thermal"),
        line=2,
    )
    assert (drain.playbook, drain.inventory, drain.vars) == (
        str(tmp_path / "plays" / "drain.yml"),
        "{node},",
        (("reason", "alert on {node}"),),
    )
    assert (drain.destructive, drain.dry_run, drain.timeout_s) == (True, True, 300.0)
    assert (restart.approvals, drain.approvals) == (1, 2)
    assert [p.name for p in playbooks.triggered_by("gpu_xid")] == ["restart_gpu_services"]
    assert playbooks.triggered_by("loss_spike") == []
    with pytest.raises(PlaybookError, match="not in the allow-list"):
        playbooks.get("rm_everything")


@pytest.mark.parametrize(
    ("entry", "where", "message"),
    [
        ("    kind: shell\n    argv: [ls]", "x.yaml:3: playbooks[0].kind", "expected one of"),
        ("    kind: command", "x.yaml:2: playbooks[0]", "needs 'argv'"),
        ("    kind: command\n    argv: []", "x.yaml:4: playbooks[0].argv", "at least"),
        (
            "    kind: command\n    argv: [ls]\n    playbook: a.yml",
            "x.yaml:5: playbooks[0].playbook",
            "takes no 'playbook'",
        ),
        (
            "    kind: ansible\n    playbook: a.yml\n    argv: [ls]",
            "x.yaml:5: playbooks[0].argv",
            "takes no 'argv'",
        ),
        ("    kind: ansible", "x.yaml:2: playbooks[0]", "needs 'playbook'"),
        (
            "    kind: command\n    argv: [ls]\n    destructive: maybe",
            "x.yaml:5: playbooks[0].destructive",
            "expected true or false",
        ),
        (
            "    kind: command\n    argv: [ls]\n    timeout: soon",
            "x.yaml:5: playbooks[0].timeout",
            "duration",
        ),
        (
            "    kind: command\n    argv: [ls]\n    triggers: [Loss-Spike]",
            "x.yaml:5: playbooks[0].triggers",
            "lower_snake_case",
        ),
        (
            "    kind: command\n    argv: [ls]\n    approvals: 0",
            "x.yaml:5: playbooks[0].approvals",
            "at least 1",
        ),
        (
            "    kind: command\n    argv: [ls]\n    approvals: 1.5",
            "x.yaml:5: playbooks[0].approvals",
            "whole number",
        ),
        (
            "    kind: command\n    argv: [ls]\n    shell: true",
            "x.yaml:5: playbooks[0]",
            "unknown key",
        ),
    ],
)
def test_each_mistake_names_its_file_line_and_field(entry: str, where: str, message: str) -> None:
    text = f"playbooks:\n  - name: fix\n{entry}\n"
    with pytest.raises(RuleError) as caught:
        parse_playbooks(text, "x.yaml")
    assert str(caught.value).startswith(where + ": "), str(caught.value)
    assert message in str(caught.value)


def test_a_name_given_twice_and_an_empty_file_are_refused() -> None:
    twice = (
        "playbooks:\n"
        "  - {name: a, kind: command, argv: [ls]}\n"
        "  - {name: a, kind: command, argv: [id]}\n"
    )
    with pytest.raises(RuleError, match=r"^x.yaml:3: playbooks\[1\]: .*already defined \(line 2\)"):
        parse_playbooks(twice, "x.yaml")
    with pytest.raises(RuleError, match="empty"):
        parse_playbooks("", "x.yaml")


def test_every_wrong_entry_is_reported_in_line_order() -> None:
    text = (
        "playbooks:\n"
        "  - {name: ok, kind: command, argv: [ls]}\n"
        "  - {name: Bad-Name, kind: command, argv: [ls]}\n"
        "  - {name: ok, kind: command, argv: [id]}\n"
        "  - {name: later, kind: shell}\n"
    )
    with pytest.raises(RuleError) as caught:
        parse_playbooks(text, "x.yaml")
    lines = str(caught.value).splitlines()
    assert [line.split(": ")[0] for line in lines] == ["x.yaml:3", "x.yaml:4", "x.yaml:5"]
    assert "lower_snake_case" in lines[0] and "already defined (line 2)" in lines[1]
    assert "expected one of" in lines[2]


def test_a_label_is_one_argument_whatever_it_holds() -> None:
    entry = Playbook("fix", "command", argv=("drain", "--node={node}", "{gpu}", "{node.__class__}"))
    labels = {"node": "node1; rm -rf / `reboot` $(id)", "gpu": "3 4"}
    prepared = entry.prepare(labels, dry_run=False)
    assert prepared.argv == (
        "drain",
        "--node=node1; rm -rf / `reboot` $(id)",
        "3 4",
        "{node.__class__}",  # only {label} is a placeholder: no attribute access, no format spec
    )


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ({}, "label 'node' is needed"),
        ({"node": "--privileged"}, "start with '-'"),
        ({"node": ""}, "empty"),
        ({"node": "n1\nrm -rf /"}, "control characters"),
    ],
)
def test_unfit_labels_are_refused(labels: dict[str, str], message: str) -> None:
    entry = Playbook("fix", "command", argv=("drain", "{node}"))
    with pytest.raises(PlaybookError, match=message):
        entry.prepare(labels, dry_run=False)


def test_ansible_runs_check_mode_on_one_host_with_the_labels_as_unsafe_variables() -> None:
    entry = Playbook("drain", "ansible", playbook="/p/drain.yml", vars=(("why", "on {node}"),))
    labels = {"node": "n1", "run": "{{ lookup('pipe', 'id') }}"}
    dry = entry.prepare(labels, dry_run=True, vars_path="/tmp/v.yaml")
    assert dry.argv[1:] == ("-i", "n1,", "/p/drain.yml", "-e", "@/tmp/v.yaml", "--check", "--diff")
    assert dry.argv[0].endswith("ansible-playbook")
    assert dry.vars_text.splitlines() == [
        '"node": !unsafe "n1"',
        "\"run\": !unsafe \"{{ lookup('pipe', 'id') }}\"",
        '"why": !unsafe "on n1"',
    ]
    real = entry.prepare(labels, dry_run=False, vars_path="/tmp/v.yaml")
    assert "--check" not in real.argv
    with pytest.raises(PlaybookError, match="may not hold"):
        entry.prepare({"node": "n1,n2,n3"}, dry_run=True)


@pytest.mark.parametrize("name", ["ansible_python_interpreter", "hostvars", "environment", "a-b"])
def test_a_label_named_like_an_ansible_setting_is_refused(name: str) -> None:
    entry = Playbook("drain", "ansible", playbook="/p/drain.yml", inventory="localhost,")
    with pytest.raises(PlaybookError, match="cannot be an Ansible variable"):
        entry.prepare({"node": "n1", name: "/tmp/evil"}, dry_run=True, vars_path="/tmp/v.yaml")
    trusted = Playbook(
        "drain", "ansible", playbook="/p/drain.yml", vars=(("ansible_python_interpreter", "/py"),)
    )  # the file's own entries may set them
    assert (
        '"ansible_python_interpreter": !unsafe "/py"'
        in trusted.prepare({"node": "n1"}, dry_run=True).vars_text
    )
