"""What every named query shares: id and mode checks, the error it raises."""

from __future__ import annotations

import re

from mast_otel.collector.store.encoding import sql_string

TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
NS = 1_000_000_000
MODE_CODE = re.compile(r"^FM-[1-3]\.[1-6]$")


class QueryError(ValueError):
    """A filter value is malformed; the message says what is expected."""


def checked_trace_id(value: str) -> str:
    trace_id = value.lower()
    if not TRACE_ID.match(trace_id):
        raise QueryError(f"expected a 32-hex trace id, got {value!r}")
    return trace_id


def id_list(trace_ids: list[str]) -> str:
    return ", ".join(sql_string(checked_trace_id(t)) for t in trace_ids)
