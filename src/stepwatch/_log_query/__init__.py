"""Log queries in Elasticsearch's bool form, read once and evaluated two ways with one meaning:
as a parameterised DuckDB ``WHERE`` over the events table (search) and in memory over one
event (log rules), so a saved search fires on exactly the lines it finds.

Why one tree and two evaluators: people paste the queries they already run against
Elasticsearch; a rule and a search that disagreed on a line would make either untrustworthy.
The tests run both over the same lines.

Meaning (documented in docs/logs.md): ``match`` on the message holds when every word of its
text (``operator: or``: any word) occurs in the line, case-insensitively; ``match_phrase`` when
the phrase does; on any other field both compare the whole value case-insensitively. ``term``
and ``terms`` compare exactly (levels, stored in lower case, ignore case). ``regexp`` searches
with RE2 (DuckDB's ``regexp_matches`` is RE2 too). ``range`` applies to the time only, with
Elasticsearch's date math (``now-5m``, ``now/d``, ``2024-05-01||+1d``). A field the line lacks
matches nothing, so ``must_not`` keeps the line.
"""

from ._errors import QueryError
from ._parse import parse_query, plain_filters, with_filters
from ._tree import LogQuery

__all__ = ["LogQuery", "QueryError", "parse_query", "plain_filters", "with_filters"]
