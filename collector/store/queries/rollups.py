"""What is failing now and since when, and how it moves: the questions on-call asks, answered
from the per-minute rollups (`mast_findings_per_minute`, `mast_runs_per_minute`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mast_otel.collector.store.backends import Store
from mast_otel.collector.store.encoding import sql_string
from mast_otel.collector.store.queries.common import MODE_CODE, NS, QueryError


@dataclass(frozen=True, slots=True)
class Scope:
    """Which runs a rollup question is about: a time range (Unix ns, `until` open) and
    optional service, model and agent."""

    since_ns: int
    until_ns: int | None = None
    service: str | None = None
    model: str | None = None
    agent: str | None = None

    def where(self, time_column: str = "Minute") -> str:
        clauses = [f"{time_column} >= toStartOfMinute(toDateTime({int(self.since_ns // NS)}))"]
        if self.until_ns is not None:
            clauses.append(f"{time_column} < toDateTime({int(self.until_ns // NS)})")
        for column, value in (
            ("ServiceName", self.service),
            ("Model", self.model),
            ("AgentName", self.agent),
        ):
            if value is not None:
                clauses.append(f"{column} = {sql_string(value)}")
        return " AND ".join(clauses)


_FINDING_DIMENSIONS = {
    "mode": "Mode",
    "model": "Model",
    "service": "ServiceName",
    "agent": "AgentName",
    "fatal": "Fatal",
}
_RUN_DIMENSIONS = {
    "outcome": "Outcome",
    "model": "Model",
    "service": "ServiceName",
    "agent": "AgentName",
}


def _dimensions(by: tuple[str, ...], known: dict[str, str]) -> list[tuple[str, str]]:
    unknown = [b for b in by if b not in known]
    if unknown:
        raise QueryError(f"cannot group by {unknown}; use any of {sorted(known)}")
    return [(name, known[name]) for name in by]


# --- what is failing now, and since when ---------------------------------------------------------


def failing_now(
    store: Store, scope: Scope, fatal_only: bool = False, limit: int = 100
) -> list[dict[str, Any]]:
    """Modes seen in the scope, per model, service and agent: how many findings and runs,
    first and last minute; fatal modes first, then the most frequent."""
    fatal = " AND Fatal = 1" if fatal_only else ""
    rows = store.query(
        f"""
        SELECT Mode AS mode, Model AS model, ServiceName AS service, AgentName AS agent,
               Fatal AS fatal, uniqExactMerge(Findings) AS findings, uniqExactMerge(Runs) AS runs,
               toUnixTimestamp(min(Minute)) AS first_minute_unix,
               toUnixTimestamp(max(Minute)) AS last_minute_unix
        FROM {store.database}.mast_findings_per_minute
        WHERE {scope.where()}{fatal}
        GROUP BY Mode, Model, ServiceName, AgentName, Fatal
        ORDER BY Fatal DESC, findings DESC, Mode, Model, ServiceName, AgentName
        LIMIT {int(limit)}
        """
    )
    for row in rows:
        for key in ("findings", "runs", "first_minute_unix", "last_minute_unix", "fatal"):
            row[key] = int(row[key])
    return rows


def failing_since(
    store: Store,
    mode: str,
    scope: Scope,
    quiet_minutes: int = 30,
) -> dict[str, Any] | None:
    """The current stretch of `mode` in the scope: since when it has been showing (no gap
    longer than `quiet_minutes` since), when last, how many findings and runs; None if it
    did not show in the scope at all."""
    if not MODE_CODE.match(mode):
        raise QueryError(f"expected a mode code like FM-1.3, got {mode!r}")
    rows = store.query(
        f"""
        SELECT toUnixTimestamp(Minute) AS minute_unix, uniqExactMerge(Findings) AS findings
        FROM {store.database}.mast_findings_per_minute
        WHERE {scope.where()} AND Mode = {sql_string(mode)}
        GROUP BY Minute
        ORDER BY Minute DESC
        """
    )
    if not rows:
        return None
    minutes = [(int(r["minute_unix"]), int(r["findings"])) for r in rows]
    start = minutes[0][0]
    for minute, _ in minutes[1:]:
        if start - minute > quiet_minutes * 60:
            break
        start = minute
    stretch = [m for m in minutes if m[0] >= start]
    runs = store.query(
        f"""
        SELECT uniqExactMerge(Runs) AS runs
        FROM {store.database}.mast_findings_per_minute
        WHERE {Scope(start * NS, None, scope.service, scope.model, scope.agent).where()}
          AND Mode = {sql_string(mode)}
        """
    )
    return {
        "mode": mode,
        "since_unix": start,
        "last_minute_unix": minutes[0][0],
        "findings": sum(n for _, n in stretch),
        "runs": int(runs[0]["runs"]) if runs else 0,
    }


def findings_per_minute(
    store: Store, scope: Scope, by: tuple[str, ...] = ("mode",), fatal_only: bool = False
) -> list[dict[str, Any]]:
    """Distinct findings and runs per minute, split by `by` (mode, model, service, agent,
    fatal): the series behind dashboard panels and alert rules."""
    dims = _dimensions(by, _FINDING_DIMENSIONS)
    select = "".join(f"{column} AS {name}, " for name, column in dims)
    group = "".join(f", {column}" for _, column in dims)
    fatal = " AND Fatal = 1" if fatal_only else ""
    rows = store.query(
        f"""
        SELECT toUnixTimestamp(Minute) AS minute_unix, {select}
               uniqExactMerge(Findings) AS findings, uniqExactMerge(Runs) AS runs
        FROM {store.database}.mast_findings_per_minute
        WHERE {scope.where()}{fatal}
        GROUP BY Minute{group}
        ORDER BY Minute{group}
        """
    )
    for row in rows:
        for key in ("minute_unix", "findings", "runs"):
            row[key] = int(row[key])
    return rows


def runs_per_minute(
    store: Store, scope: Scope, by: tuple[str, ...] = ("outcome",)
) -> list[dict[str, Any]]:
    """Closed runs per minute of their end, split by `by` (outcome, model, service, agent):
    how many, how many showed a fatal mode or any finding, their findings, distinct modes and
    steps (sums, so density = distinct_modes / runs)."""
    dims = _dimensions(by, _RUN_DIMENSIONS)
    select = "".join(f"{column} AS {name}, " for name, column in dims)
    group = "".join(f", {column}" for _, column in dims)
    rows = store.query(
        f"""
        SELECT toUnixTimestamp(Minute) AS minute_unix, {select}
               sum(Runs) AS runs, sum(FatalRuns) AS fatal_runs,
               sum(RunsWithFindings) AS runs_with_findings, sum(Findings) AS findings,
               sum(DistinctModes) AS distinct_modes, sum(Steps) AS steps
        FROM {store.database}.mast_runs_per_minute
        WHERE {scope.where()}
        GROUP BY Minute{group}
        HAVING runs != 0
        ORDER BY Minute{group}
        """
    )
    numbers = ("minute_unix", "runs", "fatal_runs", "runs_with_findings", "findings")
    for row in rows:
        for key in (*numbers, "distinct_modes", "steps"):
            row[key] = int(row[key])
    return rows
