"""A query as the ClickHouse plugin sends it to ClickHouse: variables and macros expanded.

Grafana expands a ClickHouse panel query in three steps, reproduced here so the dashboards'
SQL can be run and checked without a Grafana server:

1. the plugin's front end replaces `$__conditionalAll(condition, $var)` with `1=1` when the
   variable is at All (or empty), else with the condition (`applyConditionalAll`);
2. Grafana's template service replaces `$var`, `${var}` and `${var:format}`, with the plugin's
   own format for unformatted multi-values (`'a','b'`), and a variable at All becomes every
   option (or its custom all value, unformatted);
3. the plugin's back end expands its macros (`pkg/macros` of grafana/clickhouse-datasource, run
   by grafana/sqlds): `$__timeFilter(col)` and the others below, from the query's time range
   and interval.

Alert rules run on Grafana's back end only: step 3 alone applies to them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote

ALL = "$__all"


class InterpolationError(ValueError):
    """A macro was called with the wrong arguments, or a variable has no value."""


@dataclass(frozen=True)
class Variable:
    """A template variable's current value and its options (what All stands for)."""

    current: str | list[str]
    options: Sequence[str] = ()
    all_value: str | None = None

    @property
    def is_all(self) -> bool:
        current = self.current
        return current == ALL or (isinstance(current, list) and current == [ALL])


@dataclass(frozen=True)
class QueryContext:
    """What Grafana sends with a query: its time range, interval and the variables."""

    time_from: datetime
    time_to: datetime
    interval_s: float = 60.0
    variables: Mapping[str, Variable] = field(default_factory=dict)


# -- step 1: the plugin front end's $__conditionalAll ----------------------------------------

_CONDITIONAL_ALL = "$__conditionalAll("
# The plugin's pattern for the variable named in the macro's second argument.
_VAR_NAME = re.compile(r"(?<=\$\{)[\w\d]+(?=\})|(?<=\$)[\w\d]+")


def _macro_args(text: str, args_index: int) -> list[str]:
    """The plugin's `getMacroArgs`: split at commas on the first bracket level, untrimmed."""
    args: list[str] = []
    depth = 0
    last = 1
    sub = text[args_index:]
    for match in re.finditer(r"\(|\)|,", sub):
        token = match.group()
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        if token == "," and depth == 1:
            args.append(sub[last : match.end() - 1])
            last = match.end()
        if depth == 0:
            args.append(sub[last : match.end() - 1])
            return args
    return []


def apply_conditional_all(sql: str, variables: Mapping[str, Variable]) -> str:
    index = sql.rfind(_CONDITIONAL_ALL)
    while index != -1:
        params = _macro_args(sql, index + len(_CONDITIONAL_ALL) - 1)
        if len(params) != 2:
            return sql
        phrase = params[0]
        name = _VAR_NAME.search(params[1].strip())
        if name:
            variable = variables.get(name.group())
            value = _current_text(variable) if variable else None
            if value in ("", ALL):
                phrase = "1=1"
        sql = sql.replace(f"{_CONDITIONAL_ALL}{params[0]},{params[1]})", phrase, 1)
        index = sql.rfind(_CONDITIONAL_ALL)
    return sql


def _current_text(variable: Variable) -> str:
    """`current.value.toString()` in JavaScript: arrays join with commas."""
    current = variable.current
    return ",".join(current) if isinstance(current, list) else current


# -- step 2: Grafana's template service --------------------------------------------------------

_TEMPLATE = re.compile(
    r"\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^\}]+))?(?::([^\}]+))?\}"
)


# Grafana's formats (`formatRegistry` of Grafana and its scenes library), reproduced exactly,
# escaping included: `singlequote` and `sqlstring` leave backslashes alone, which ClickHouse
# reads as escapes, so a value ending in a backslash closes the string early. Only
# `percentencode` (RFC 3986, everything but letters, digits and -_.~ as %XX) is safe inside a
# ClickHouse string whatever the value.


def _singlequote(value: str | list[str]) -> str:
    """`'` + the value with each `'` as `\\'` + `'`; multi-values joined by commas."""
    if isinstance(value, list):
        return ",".join(_singlequote(v) for v in value)
    return "'" + value.replace("'", "\\'") + "'"


def _sqlstring(value: str | list[str]) -> str:
    """Each `'` doubled and each `"` as `\\"`, quoted with `'`; multi-values joined by commas."""
    if isinstance(value, list):
        return ",".join(_sqlstring(v) for v in value)
    return "'" + value.replace("'", "''").replace('"', '\\"') + "'"


def _encode_uri_component_strict(value: str) -> str:
    """JavaScript's encodeURIComponent (UTF-8) with `!'()*` encoded too: all but
    A-Z a-z 0-9 - _ . ~ as uppercase %XX."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="-_.~")


def _percentencode(value: str | list[str]) -> str:
    """Multi-values as a glob, `{a,b}`, then the whole percent-encoded."""
    if isinstance(value, list):
        return _encode_uri_component_strict("{" + ",".join(value) + "}")
    return _encode_uri_component_strict(value)


def _raw(value: str | list[str]) -> str:
    """JavaScript's String(value): arrays join with commas."""
    return ",".join(value) if isinstance(value, list) else value


def _plugin_default_format(value: str | list[str]) -> str:
    """The plugin's `format`: multi-values as 'a','b' (no escaping), single values raw."""
    if isinstance(value, list):
        return "'" + "','".join(value) + "'"
    return value


_FORMATS = {
    "singlequote": _singlequote,
    "sqlstring": _sqlstring,
    "percentencode": _percentencode,
    "raw": _raw,
    "csv": _raw,
}


def replace_variables(sql: str, variables: Mapping[str, Variable]) -> str:
    def substitute(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(4)
        fmt = match.group(3) or match.group(6)
        variable = variables.get(name)
        if variable is None:
            return match.group(0)
        value: str | list[str] = variable.current
        if variable.is_all:
            if variable.all_value is not None:
                return variable.all_value
            value = list(variable.options)
        if fmt is None:
            return _plugin_default_format(value)
        formatter = _FORMATS.get(fmt)
        if formatter is None:
            raise InterpolationError(f"format {fmt!r} of ${{{name}}} is not reproduced here")
        return formatter(value)

    return _TEMPLATE.sub(substitute, sql)


# -- step 3: the plugin back end's macros (grafana/clickhouse-datasource pkg/macros) -----------


def _date_time(moment: datetime) -> str:
    return f"toDateTime({math.floor(moment.timestamp())})"


def _date_time64(moment: datetime) -> str:
    return f"fromUnixTimestamp64Milli({math.floor(moment.timestamp() * 1000)})"


def _date(moment: datetime) -> str:
    return f"toDate('{moment.astimezone(UTC).strftime('%Y-%m-%d')}')"


def _one(name: str, args: list[str]) -> str:
    if len(args) != 1:
        raise InterpolationError(f"$__{name} expects 1 argument, got {len(args)}")
    return args[0]


def _expand(name: str, args: list[str], ctx: QueryContext) -> str:
    start, end = ctx.time_from, ctx.time_to
    seconds = int(max(ctx.interval_s, 1))
    if name == "fromTime":
        return _date_time(start)
    if name == "toTime":
        return _date_time(end)
    if name == "fromTime_ms":
        return _date_time64(start)
    if name == "toTime_ms":
        return _date_time64(end)
    if name == "timeFilter":
        column = _one(name, args)
        return f"{column} >= {_date_time(start)} AND {column} <= {_date_time(end)}"
    if name == "timeFilter_ms":
        column = _one(name, args)
        return f"{column} >= {_date_time64(start)} AND {column} <= {_date_time64(end)}"
    if name == "dateFilter":
        column = _one(name, args)
        return f"{column} >= {_date(start)} AND {column} <= {_date(end)}"
    if name in ("dateTimeFilter", "dt"):
        if len(args) != 2:
            raise InterpolationError(f"$__{name} expects 2 arguments, got {len(args)}")
        date_column, time_column = args
        return (
            f"({date_column} >= {_date(start)} AND {date_column} <= {_date(end)}) AND "
            f"({time_column} >= {_date_time(start)} AND {time_column} <= {_date_time(end)})"
        )
    if name == "timeInterval":
        return f"toStartOfInterval(toDateTime({_one(name, args)}), INTERVAL {seconds} second)"
    if name == "timeInterval_ms":
        milliseconds = int(max(ctx.interval_s * 1000, 1))
        column = _one(name, args)
        return f"toStartOfInterval(toDateTime64({column}, 3), INTERVAL {milliseconds} millisecond)"
    if name == "interval_s":
        return str(seconds)
    raise InterpolationError(f"unknown macro $__{name}")


MACROS = (
    "fromTime",
    "toTime",
    "fromTime_ms",
    "toTime_ms",
    "timeFilter",
    "timeFilter_ms",
    "dateFilter",
    "dateTimeFilter",
    "dt",
    "timeInterval",
    "timeInterval_ms",
    "interval_s",
)


def _parse_args(text: str) -> tuple[list[str], int]:
    """sqlds' `parseArgs`: a bracketed list at the start of `text`, split at top-level commas
    and trimmed; returns the arguments and the length consumed (0 when there is no list)."""
    if not text.startswith("("):
        return [], 0
    args: list[str] = []
    depth = 0
    current: list[str] = []
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
            if depth == 1:
                continue
        elif char == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(current).strip())
                return args, index + 1
        elif char == "," and depth == 1:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    raise InterpolationError("a macro's argument list has no closing bracket")


def apply_macros(sql: str, ctx: QueryContext) -> str:
    for name in MACROS:
        pattern = re.compile(rf"\$__{name}\b")
        while True:
            match = pattern.search(sql)
            if match is None:
                break
            args, length = _parse_args(sql[match.end() :])
            replacement = _expand(name, args, ctx)
            sql = sql[: match.start()] + replacement + sql[match.end() + length :]
    leftover = re.search(r"\$__\w+", sql)
    if leftover:
        raise InterpolationError(f"{leftover.group()} is not a macro of the ClickHouse plugin")
    return sql


def macro_arguments(sql: str) -> list[tuple[str, list[str]]]:
    """Every backend macro call in `sql` with its arguments (for checks on their form)."""
    calls = []
    for name in MACROS:
        for match in re.finditer(rf"\$__{name}\b", sql):
            args, _ = _parse_args(sql[match.end() :])
            calls.append((name, args))
    return calls


def panel_query(sql: str, ctx: QueryContext) -> str:
    """A dashboard panel's SQL as ClickHouse receives it."""
    return apply_macros(
        replace_variables(apply_conditional_all(sql, ctx.variables), ctx.variables), ctx
    )


def alert_query(sql: str, ctx: QueryContext) -> str:
    """An alert rule's SQL as ClickHouse receives it (back-end macros only)."""
    if _TEMPLATE.search(re.sub(r"\$__\w+", "", sql)):
        raise InterpolationError("alert queries cannot use dashboard variables")
    return apply_macros(sql, ctx)


def now_utc() -> datetime:
    return datetime.now(UTC)
