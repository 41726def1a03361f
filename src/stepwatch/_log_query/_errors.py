"""A query the log search and log rules cannot read, and where in it."""

from __future__ import annotations


class QueryError(ValueError):
    """A query this reader cannot take; the message names the clause (an API answers 400)."""
