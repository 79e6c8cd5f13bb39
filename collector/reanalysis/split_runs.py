"""Runs split across replicas, made whole again (deploy/scale-out.md).

Replicas sit behind a load balancer that routes by trace id with a consistent-hash ring. When a
replica is added or removed the ring changes and a share of trace ids moves to another replica,
runs in flight among them: the spans that arrived before the change sit on one replica, the
rest on another, and each would analyse its part as if it were the whole run.

Every replica stores every span it receives in the one shared store. With
`sharding.merge_split_runs` on, a replica that has closed runs, once per storage flush:
1. writes its own spans, findings and signatures (the exporter's flush);
2. counts, per closed trace, the distinct spans the store holds; more than the replica saw
   means other replicas received part of the trace;
3. for those traces, analyses the whole trace from the store, deletes every finding stored
   for them (partial ones, from any replica) and writes the whole trace's findings and a
   signature whose version is above every version already stored for the trace.

Why the last word is the whole trace's: every replica does step 1 before step 2. Of two
replicas holding parts of a trace, the one that looks last (step 2) therefore sees the other's
spans, re-analyses, and its deletes and writes come after everything the other wrote. Replicas
that look at about the same time both see everything and write the same result.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from mast_otel.collector.config import Config
from mast_otel.collector.reanalysis.whole_traces import analyze_stored_traces
from mast_otel.collector.store.arrow import findings_table
from mast_otel.collector.store.backends import Store
from mast_otel.collector.store.exporter import Exporter
from mast_otel.collector.store.signatures import write_signature_versions
from mast_otel.processors.judge import JUDGE_DETECTOR
from mast_otel.processors.window import WindowOutput

log = logging.getLogger(__name__)

# Trace ids per look-up statement (keeps the IN list of one query bounded).
LOOKUP_BATCH = 1_000


@dataclass
class SplitRunStats:
    runs_checked: int = 0
    runs_merged: int = 0
    checks_dropped: int = 0
    check_errors: int = 0


@dataclass
class _Closed:
    spans_seen: int
    start_ns: int
    end_ns: int


class SplitRunMerger:
    """Finds this replica's closed runs that other replicas hold part of, and writes the whole
    trace's findings and signature over the partial ones."""

    def __init__(self, store: Store, config: Config, exporter: Exporter) -> None:
        self.store = store
        self.config = config
        self.exporter = exporter
        self.stats = SplitRunStats()
        self._pending: OrderedDict[str, _Closed] = OrderedDict()
        self._last_check = float("-inf")

    @property
    def pending(self) -> int:
        return len(self._pending)

    def note(self, out: WindowOutput) -> None:
        """Remember the runs this output closes (a pipeline output listener)."""
        for signature in out.signatures:
            # A run's steps are the distinct spans (and agent log events) it was given.
            self._pending[signature.trace_id] = _Closed(
                signature.steps, signature.start_ns, signature.end_ns
            )
            self._pending.move_to_end(signature.trace_id)
        limit = self.config.sharding.max_pending_checks
        while len(self._pending) > limit:
            self._pending.popitem(last=False)
            self.stats.checks_dropped += 1

    def check(self, now: float, final: bool = False) -> None:
        """Look for split runs among those closed since the last look; runs on the pipeline's
        thread after its export, at most once per storage flush interval (always at stop)."""
        if not self._pending:
            return
        if not final and now - self._last_check < self.config.storage.flush_interval_s:
            return
        self._last_check = now
        try:
            # Our own rows first: the argument in the module docstring rests on it.
            self.exporter.flush(now, force=True)
            batch = list(self._pending.items())[:LOOKUP_BATCH]
            split = self._split_traces(batch)
            if split:
                self._merge(split)
        except Exception:
            # The runs stay pending and are looked at again after the next flush.
            self.stats.check_errors += 1
            log.exception("looking for runs split across replicas failed; will retry")
            return
        for trace_id, _ in batch:
            self._pending.pop(trace_id, None)
        self.stats.runs_checked += len(batch)
        self.stats.runs_merged += len(split)

    def _split_traces(self, batch: list[tuple[str, _Closed]]) -> list[str]:
        window_ns = int(self.config.sharding.trace_time_window_s * 1e9)
        since = min(c.start_ns for _, c in batch) - window_ns
        until = max(c.end_ns for _, c in batch) + window_ns
        listed = ", ".join(f"'{trace_id}'" for trace_id, _ in batch)
        rows = self.store.query(
            f"SELECT TraceId, uniqExact(SpanId) AS spans "
            f"FROM {self.store.database}.otel_traces "
            f"WHERE TraceId IN ({listed}) "
            f"AND Timestamp BETWEEN fromUnixTimestamp64Nano({max(0, since)}) "
            f"AND fromUnixTimestamp64Nano({until}) "
            f"GROUP BY TraceId"
        )
        stored = {row["TraceId"]: int(row["spans"]) for row in rows}
        return [t for t, closed in batch if stored.get(t, 0) > closed.spans_seen]

    def _merge(self, trace_ids: list[str]) -> None:
        analysis = analyze_stored_traces(self.store, self.config, trace_ids)
        db = self.store.database
        listed = ", ".join(f"'{t}'" for t in trace_ids)
        # Partial findings, from whichever replica, give way to the whole trace's (a semantic
        # judge's verdicts are not recomputed here, so they stay).
        self.store.execute(
            f"DELETE FROM {db}.mast_findings WHERE TraceId IN ({listed}) "
            f"AND Detector != '{JUDGE_DETECTOR}'"
        )
        if analysis.findings:
            self.store.insert_arrow("mast_findings", findings_table(analysis.findings))
        if analysis.signatures:
            # Above every stored version, whatever the clocks of the replicas that wrote them,
            # cancelling each replica's partial signature in the runs rollup.
            write_signature_versions(self.store, analysis.signatures, keep_stored_outcome=False)
        log.info(
            "merged %d run(s) split across replicas: %s",
            len(trace_ids),
            ", ".join(trace_ids[:5]) + (" ..." if len(trace_ids) > 5 else ""),
        )

    def health(self) -> dict[str, Any]:
        return {"pending_checks": self.pending, **vars(self.stats)}


__all__ = ["SplitRunMerger", "SplitRunStats"]
