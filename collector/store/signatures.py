"""Writing new versions of run signatures: outcomes posted after a run closed, re-analysis
(backfill), and whole-trace signatures over the partial ones of a run split across replicas.

`mast_signatures` keeps one current row per run (ReplacingMergeTree on `Version`: the highest
wins). Replacing a version writes, in one insert, the new row and a cancelling copy of the old
one (`Sign = -1`, the old `Version`), so the runs-per-minute rollup, which sums `Sign`, moves the
run from its old outcome to its new one instead of counting it twice. One insert is one block:
the store takes both rows or neither, and a retry carries the same deduplication token.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

import pyarrow as pa

from mast_otel.collector.store import queries
from mast_otel.collector.store.arrow import signatures_table
from mast_otel.collector.store.backends import Store
from mast_otel.collector.store.retry import RetryPolicy, insert_with_retry
from mast_otel.processors.model import RunSignature

OUTCOMES = ("success", "failure")


class UnknownRun(LookupError):
    """No signature is stored for that trace (the run never closed here, or the id is wrong)."""


def signature_from_row(row: dict[str, Any]) -> RunSignature:
    """A stored signature row as a RunSignature: a current row (`queries.current_signature_rows`,
    all columns) or a counted version (`queries.counted_signature_rows`, the values the runs
    rollup counted it with); columns a row does not carry are zero or empty, which is what the
    cancelling copy of a counted version must hold."""
    score = row.get("score")
    return RunSignature(
        trace_id=row["trace_id"],
        service=row["service"],
        agent=row["agent"],
        model=row["model"],
        start_ns=int(row["start_ns"]),
        end_ns=int(row["end_ns"]),
        close_reason=row.get("close_reason", ""),
        steps=int(row["steps"]),
        llm_calls=int(row.get("llm_calls", 0)),
        tool_calls=int(row.get("tool_calls", 0)),
        errors=int(row.get("errors", 0)),
        input_tokens=int(row.get("input_tokens", 0)),
        output_tokens=int(row.get("output_tokens", 0)),
        mode_counts={k: int(v) for k, v in dict(row.get("mode_counts", {})).items()},
        outcome=row["outcome"],
        score=None if score is None else float(score),
        conversation_id=row.get("conversation_id", ""),
        decisive_span_id=row.get("decisive_span_id", ""),
        decisive_step=int(row.get("decisive_step", -1)),
        responsible_agent=row.get("responsible_agent", ""),
        attribution_chain=row.get("attribution_chain", ""),
    )


def _same_run(a: RunSignature, b: RunSignature) -> bool:
    """Whether two signatures say the same about a run. How it was closed is not part of
    that: a re-analysis closes at the end of its input a run that idled out live."""
    return dataclasses.replace(a, close_reason="") == dataclasses.replace(b, close_reason="")


def _with_counts(table: pa.Table, counts: list[tuple[int, int, int] | None]) -> pa.Table:
    """Set FindingCount, DistinctModes and Fatal where a row must repeat counted values."""
    if all(c is None for c in counts):
        return table
    for position, (column, kind) in enumerate(
        (("FindingCount", pa.uint32()), ("DistinctModes", pa.uint8()), ("Fatal", pa.uint8()))
    ):
        values = table.column(column).to_pylist()
        for i, override in enumerate(counts):
            if override is not None:
                values[i] = override[position]
        index = table.schema.get_field_index(column)
        table = table.set_column(index, column, pa.array(values, kind))
    return table


def write_signature_versions(
    store: Store,
    signatures: list[RunSignature],
    retry: RetryPolicy | None = None,
    keep_stored_outcome: bool = True,
) -> tuple[int, int]:
    """Store `signatures` as the current version of their runs. A run without a stored
    signature gets its first row; one whose stored signature says the same is left alone; any
    other replaces what is stored: the new row, above every stored version, and a cancelling
    row for each version the runs rollup still counts (one normally; one per part when
    collectors stored parts of a run), all in one insert. With `keep_stored_outcome` (for
    re-analysis) an outcome already stored is kept as it is: re-analysis revises findings,
    outcomes come from the harness or an evaluator (`record_outcome`), and one posted after
    the run must survive a backfill. Returns (written, unchanged)."""
    unique = list({s.trace_id: s for s in signatures}.values())
    traces = [s.trace_id for s in unique]
    current = queries.current_signature_rows(store, traces)
    counted = queries.counted_signature_rows(store, traces)
    rows: list[RunSignature] = []
    versions: list[int] = []
    signs: list[int] = []
    counts: list[tuple[int, int, int] | None] = []
    unchanged = written = 0
    now = time.time_ns()
    for sig in unique:
        stored_row = current.get(sig.trace_id)
        live = counted.get(sig.trace_id, [])
        if stored_row is not None:
            stored = signature_from_row(stored_row)
            if keep_stored_outcome and (stored.outcome or stored.score is not None):
                sig = dataclasses.replace(sig, outcome=stored.outcome, score=stored.score)
            alone = [(r["version"], r["net"]) for r in live] == [(stored_row["version"], 1)]
            if alone and _same_run(sig, stored):
                unchanged += 1
                continue
        newest = int(stored_row["version"]) if stored_row is not None else 0
        for old in live:
            rows.append(signature_from_row(old))
            versions.append(int(old["version"]))
            signs.append(max(-127, min(127, -old["net"])))
            counts.append(
                (int(old["finding_count"]), int(old["distinct_modes"]), int(old["fatal"]))
            )
            newest = max(newest, int(old["version"]))
        rows.append(sig)
        versions.append(max(now, newest + 1))
        signs.append(1)
        counts.append(None)
        written += 1
    if rows:
        insert_with_retry(
            store,
            "mast_signatures",
            _with_counts(signatures_table(rows, versions, signs), counts),
            uuid.uuid4().hex,
            retry or RetryPolicy(),
        )
    return written, unchanged


def record_outcome(
    store: Store,
    trace_id: str,
    outcome: str,
    score: float | None = None,
    retry: RetryPolicy | None = None,
) -> RunSignature:
    """Post a run's outcome after it closed: writes a new version of its signature with
    `outcome` ("success" or "failure"; "" keeps the stored one) and `score` (the task score in
    [0, 1]; None keeps the stored one), replacing the stored version everywhere (signature
    queries and the runs rollup). Returns the signature now current."""
    if outcome not in ("", *OUTCOMES):
        raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
    if score is not None and not 0.0 <= score <= 1.0:
        raise ValueError(f"score must be between 0 and 1, got {score}")
    current = queries.current_signature_rows(store, [trace_id])
    row = current.get(trace_id.lower())
    if row is None:
        raise UnknownRun(
            f"no signature is stored for trace {trace_id}: the run has not closed yet, or the "
            f"id is not one this store has seen"
        )
    stored = signature_from_row(row)
    updated = dataclasses.replace(
        stored,
        outcome=outcome or stored.outcome,
        score=stored.score if score is None else score,
    )
    write_signature_versions(store, [updated], retry, keep_stored_outcome=False)
    return updated
