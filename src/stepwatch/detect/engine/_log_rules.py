"""Log rules: a compiled matcher per rule, and when each last fired for an entity, so that one
incident's many lines make one alert."""

from __future__ import annotations

import json

from ..._log_query import parse_query
from ..._regex import compile_regex
from ...model import Event
from ..rules import LogMatch, Rule
from ._alert import Alert, _alert, _entity
from ._lifecycle import AlertState, Transition

__all__ = ["LOG_LINE_CHARS", "LOG_REPEAT_S", "LogRule"]

#: A log rule fires again for the same entity only after this much quiet (an incident's span).
LOG_REPEAT_S = 600.0
#: How much of the matching log line a log alert quotes.
LOG_LINE_CHARS = 2000


class LogRule:
    """A log rule: a compiled matcher plus when it last fired per entity."""

    def __init__(self, rule: Rule, match: LogMatch) -> None:
        self.rule, self.match = rule, match
        self.regex = compile_regex(match.regex) if match.regex else None
        self.exclude = compile_regex(match.exclude) if match.exclude else None
        self.query = parse_query(json.loads(match.query)) if match.query else None
        self.last: dict[tuple[tuple[str, str], ...], float] = {}

    def matches(self, event: Event) -> bool:
        """Whether the line matches. A query's ``now`` is the line's own time: a saved search's
        relative window (``now-5m``) holds for each new line as it arrives, in a replay too."""
        text = event.text
        if self.query is not None and not self.query.matches(event, now=event.ts):
            return False
        if self.regex is not None and not self.regex.search(text):
            return False
        if not all(word in text for word in self.match.all):
            return False
        if self.match.any and not any(word in text for word in self.match.any):
            return False
        return self.exclude is None or not self.exclude.search(text)

    def forget_run(self, run: str) -> None:
        """Forget when the entities of a run that ended last fired: that run says no more."""
        self.last = {k: ts for k, ts in self.last.items() if dict(k).get("run") != run}

    def fire(self, event: Event) -> Alert | None:
        entity = _entity(self.rule, event.labels)
        key = tuple(sorted(entity.items()))
        last = self.last.get(key)
        self.last[key] = event.ts
        if last is not None and event.ts - last < LOG_REPEAT_S:
            return None
        alert = _alert(self.rule, entity, Transition(AlertState.FIRING, event.ts, event.ts, 1.0))
        alert.annotations["line"] = event.text[:LOG_LINE_CHARS]  # what was said, verbatim
        return alert
