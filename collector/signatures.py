"""Writing new versions of run signatures: outcomes posted after a run closed, and re-analysis.

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

from collector import queries
from collector.exporters.clickhouse import RetryPolicy, insert_with_retry, signatures_table
from collector.store import Store
from processors.model import RunSignature

OUTCOMES = ("success", "failure")


class UnknownRun(LookupError):
    """No signature is stored for that trace (the run never closed here, or the id is wrong)."""


def signature_from_row(row: dict[str, Any]) -> RunSignature:
    """A stored signature row (as `queries.current_signature_rows` returns it) as a
    RunSignature."""
    score = row.get("score")
    return RunSignature(
        trace_id=row["trace_id"],
        service=row["service"],
        agent=row["agent"],
        model=row["model"],
        start_ns=int(row["start_ns"]),
        end_ns=int(row["end_ns"]),
        close_reason=row["close_reason"],
        steps=int(row["steps"]),
        llm_calls=int(row["llm_calls"]),
        tool_calls=int(row["tool_calls"]),
        errors=int(row["errors"]),
        input_tokens=int(row["input_tokens"]),
        output_tokens=int(row["output_tokens"]),
        mode_counts={k: int(v) for k, v in dict(row["mode_counts"]).items()},
        outcome=row["outcome"],
        score=None if score is None else float(score),
        conversation_id=row["conversation_id"],
    )


def _same_run(a: RunSignature, b: RunSignature) -> bool:
    """Whether two signatures say the same about a run. How it was closed is not part of
    that: a re-analysis closes at the end of its input a run that idled out live."""
    return dataclasses.replace(a, close_reason="") == dataclasses.replace(b, close_reason="")


def write_signature_versions(
    store: Store,
    signatures: list[RunSignature],
    current: dict[str, dict[str, Any]] | None = None,
    retry: RetryPolicy | None = None,
    keep_stored_outcome: bool = True,
) -> tuple[int, int]:
    """Store `signatures` as the current version of their runs. A run without a stored
    signature gets its first row; one whose stored signature says the same is left alone; any
    other replaces the stored one (with its cancelling row). With `keep_stored_outcome` (for
    re-analysis) an outcome already stored is kept as it is: re-analysis revises findings,
    outcomes come from the harness or an evaluator (`record_outcome`), and one posted after
    the run must survive a backfill.
    `current` are the stored rows if the caller has them. Returns (written, unchanged)."""
    if current is None:
        current = queries.current_signature_rows(store, [s.trace_id for s in signatures])
    rows: list[RunSignature] = []
    versions: list[int] = []
    signs: list[int] = []
    unchanged = 0
    now = time.time_ns()
    for sig in {s.trace_id: s for s in signatures}.values():
        stored_row = current.get(sig.trace_id)
        if stored_row is None:
            rows.append(sig)
            versions.append(now)
            signs.append(1)
            continue
        stored = signature_from_row(stored_row)
        if keep_stored_outcome and (stored.outcome or stored.score is not None):
            sig = dataclasses.replace(sig, outcome=stored.outcome, score=stored.score)
        if _same_run(sig, stored):
            unchanged += 1
            continue
        old_version = int(stored_row["version"])
        rows.extend((stored, sig))
        versions.extend((old_version, max(now, old_version + 1)))
        signs.extend((-1, 1))
    if rows:
        insert_with_retry(
            store,
            "mast_signatures",
            signatures_table(rows, versions, signs),
            uuid.uuid4().hex,
            retry or RetryPolicy(),
        )
    return len(rows) - signs.count(-1), unchanged


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
    write_signature_versions(store, [updated], current, retry, keep_stored_outcome=False)
    return updated
