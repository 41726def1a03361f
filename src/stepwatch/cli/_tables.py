"""What the commands that talk to a collector print: a table per listing (alerts, groups,
silences, actions, audit records, tokens), one action in full, and times as people read them."""

from __future__ import annotations

import datetime as dt
import re
import textwrap
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from .._text import format_duration, plural

__all__ = [
    "action_text",
    "actions_table",
    "alert_groups_table",
    "alerts_table",
    "audit_table",
    "human_time",
    "silences_table",
    "titled_table",
    "unknown_group_labels",
]

#: What alerts can be grouped by besides their labels.
GROUP_FIELDS = ("kind", "severity")
#: The fields of an audit record's detail that say why: a command's reason, an approval's
#: comment, a policy's decision, a refused request's error, a failed delivery's errors.
_WHY = ("reason", "comment", "why", "error", "errors")
#: How much of the first line of a model's analysis an incident's row shows.
ANALYSIS_CHARS = 80
#: Control characters (an escape sequence's start among them), which a terminal would obey.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def titled_table(title: str, columns: Sequence[str]) -> Table:
    """An empty table in the look every listing shares: title on the left, long cells folded."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def human_time(ts: float, now: float | None = None) -> str:
    """A time as people read it, local with its zone and how far from now:
    "2026-12-02 07:15 UTC (in 2h 00m)", "2026-12-02 05:03 UTC (4m 05s ago)"."""
    delta = round(ts - (time.time() if now is None else now))
    if delta == 0:
        near = "now"
    else:
        near = f"in {format_duration(delta)}" if delta > 0 else f"{format_duration(-delta)} ago"
    local = dt.datetime.fromtimestamp(ts).astimezone()
    return f"{local:%Y-%m-%d %H:%M %Z} ({near})"


def _when(ts: Any) -> str:
    """A table cell's time: ``human_time``, or blank when there is none."""
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        return "" if ts is None else str(ts)
    return human_time(ts)


def _entity(labels: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(labels.items()))


def unknown_group_labels(by: Sequence[str], groups: Sequence[dict[str, Any]]) -> str | None:
    """Why grouping ``by`` means nothing when one of its names is a label no alert has (a
    typo puts every alert in one group), else None."""
    labels = {k for g in groups for a in g["alerts"] for k in a["labels"]}
    unknown = [name for name in by if groups and name not in {*GROUP_FIELDS, *labels}]
    if not unknown:
        return None
    return (
        f"no alert has the label {unknown[0]!r}; group by {', '.join(GROUP_FIELDS)} or their "
        f"labels: {', '.join(sorted(labels))}"
    )


def alerts_table(alerts: Sequence[dict[str, Any]]) -> Table:
    """One row per alert: state, severity, kind, entity, since, what it says."""
    table = titled_table(
        plural(len(alerts), "alert"),
        ("id", "state", "severity", "kind", "labels", "since", "summary"),
    )
    for a in alerts:
        state = a["state"]
        marks = [m for m in ("silenced", "inhibited", "acked") if a.get(m)]
        if marks:
            state += f" ({', '.join(marks)})"
        summary = a.get("annotations", {}).get("summary", "")
        table.add_row(
            a["id"],
            state,
            a["severity"],
            a["kind"],
            _entity(a["labels"]),
            _when(a["since"]),
            summary,
        )
    return table


def alert_groups_table(groups: Sequence[dict[str, Any]]) -> Table:
    """One row per group: its labels, how many alerts, the worst severity, since when."""
    table = titled_table(
        plural(len(groups), "group"), ("group", "alerts", "severity", "since", "first summary")
    )
    for g in groups:
        first = g["alerts"][0].get("annotations", {}).get("summary", "") if g["alerts"] else ""
        table.add_row(
            _entity(g["labels"]), str(g["count"]), g["severity"], _when(g["since"]), first
        )
    return table


def incidents_table(incidents: Sequence[dict[str, Any]]) -> Table:
    """One row per incident: when, its run, its root cause and why, how many alerts, the
    playbooks its root cause requests with their actions' states, and the start of the
    model's analysis when there is one (``--json`` has all of it)."""
    table = titled_table(
        plural(len(incidents), "incident"),
        ("since", "run", "root cause", "evidence", "alerts", "open", "playbooks", "analysis"),
    )
    for i in incidents:
        cause = i["root_cause"]["alert"]
        where = _entity({k: v for k, v in cause["labels"].items() if k != "run"})
        table.add_row(
            _when(i["start"]),
            i["run"] or "",
            f"{cause['kind']} {where}".strip(),
            "; ".join(i["root_cause"]["evidence"]),
            str(len(i["alerts"])),
            "yes" if i["open"] else "no",
            ", ".join(f"{p['name']}:{p['status'] or 'not requested'}" for p in i["playbooks"]),
            _analysis_line(i.get("analysis")),
        )
    return table


def _analysis_line(analysis: Mapping[str, Any] | None) -> Text:
    """``model: first line of its analysis`` (cut at ``ANALYSIS_CHARS``), empty without one;
    the model wrote it, so it is plain text: no markup of it is read, no control character
    passes."""
    if analysis is None:
        return Text("")
    first = next(iter(str(analysis["text"]).strip().splitlines()), "")
    shown = _CONTROL.sub("", textwrap.shorten(first, ANALYSIS_CHARS, placeholder="…"))
    return Text(f"{analysis['model']}: {shown}")


def silences_table(silences: Sequence[dict[str, Any]]) -> Table:
    """One row per silence: its matchers, window, who and why."""
    table = titled_table(
        plural(len(silences), "silence"),
        ("id", "matchers", "starts", "ends", "active", "by", "comment"),
    )
    for s in silences:
        table.add_row(
            s["id"],
            " ".join(s["matchers"]),
            _when(s["starts"]),
            _when(s["ends"]),
            "yes" if s["active"] else "no",
            s.get("created_by", ""),
            s.get("comment", ""),
        )
    return table


def actions_table(actions: Sequence[dict[str, Any]]) -> Table:
    """One row per action: its id, playbook, entity, state, who asked and who decided."""
    table = titled_table(
        plural(len(actions), "action"),
        ("id", "playbook", "labels", "state", "requested by", "decided by", "created"),
    )
    for a in actions:
        state = a["state"] + (" (dry run)" if a["dry_run"] else "")
        if a.get("exit_code") is not None:
            state += f", exit {a['exit_code']}"
        table.add_row(
            a["id"],
            a["playbook"],
            _entity(a["labels"]),
            state,
            a["requested_by"],
            a.get("decided_by", ""),
            _when(a["created"]),
        )
    return table


def _why(record: Mapping[str, Any]) -> str:
    """Why a record was made, from its detail and its alert: "no; alert gpu_thermal 3f2a"."""
    detail = record.get("detail") or {}
    said = [
        "; ".join(map(str, value)) if isinstance(value, list) else str(value)
        for key in _WHY
        if (value := detail.get(key))
    ]
    alert = _alert_of(record)
    return "; ".join(said + ([f"alert {alert}"] if alert else []))


def _alert_of(record: Mapping[str, Any]) -> str:
    """The alert an audit record or an action is about: "gpu_thermal 3f2a", or blank."""
    return " ".join(x for x in (record.get("kind", ""), record.get("alert_id", "")) if x)


def audit_table(records: Sequence[dict[str, Any]]) -> Table:
    """One row per audit record, newest first: when, what kind of act, who, what, result, why."""
    table = titled_table(
        plural(len(records), "audit record"),
        ("time", "action", "actor", "what", "result", "labels", "why"),
    )
    for r in records:
        table.add_row(
            _when(r["ts"]),
            r["action"],
            r["actor"],
            r["what"],
            r["result"],
            _entity(r["labels"]),
            _why(r),
        )
    return table


def _tail(name: str, text: str) -> list[str]:
    """A stream's kept end, indented under its name."""
    if not text:
        return [f"{name}: (nothing)"]
    return [f"{name}, its end:", textwrap.indent(text.rstrip("\n"), "  ")]


def action_text(a: Mapping[str, Any]) -> str:
    """One action in full: what ran where, its state, who asked and decided, its output."""
    state = a["state"] + (" (dry run)" if a["dry_run"] else "")
    if a.get("exit_code") is not None:
        state += f", exit {a['exit_code']} after {a.get('duration_s', 0):.2f} s"
    if a["state"] == "pending":
        decided = f"not yet: stepwatch actions approve {a['id']} (or reject)"
        if a.get("approvals"):
            decided += f"; approved so far by {', '.join(a['approvals'])}"
    else:
        decided = f"by {a['decided_by']}" if a.get("decided_by") else "no approval needed"
        decided += f": {a['comment']}" if a.get("comment") else ""
    alert = _alert_of(a)
    lines = [
        f"action {a['id']}: {a['playbook']} on {_entity(a['labels'])}",
        f"state:     {state}",
        f"command:   {a.get('command', '')}",
        f"requested: by {a['requested_by']}, {_when(a['created'])}",
        f"decided:   {decided}",
        f"updated:   {_when(a['updated'])}",
        *([f"alert:     {alert}"] if alert else []),
        *([f"error:     {a['error']}"] if a.get("error") else []),
        *_tail("stdout", a.get("stdout", "")),
        *_tail("stderr", a.get("stderr", "")),
    ]
    return "\n".join(lines)
