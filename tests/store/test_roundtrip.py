"""Spans, findings and signatures written through the exporter come back as written; rollups
agree with the base tables; retried batches are stored once; a posted outcome replaces the
stored one everywhere."""

from __future__ import annotations

import random

import pytest

from mast_otel.collector.store import ChdbStore, StoreError, migrate, queries
from mast_otel.collector.store.arrow import findings_table, signatures_table, spans_table
from mast_otel.collector.store.batching import ClickHouseExporter
from mast_otel.collector.store.retry import RetryPolicy
from mast_otel.collector.store.signatures import UnknownRun, record_outcome
from mast_otel.collector.store.stored_spans import span_record
from mast_otel.processors.conventions import MODE_CODES, fatal_prior
from tests.storedata import MINUTE, T0, finding, signature, span, trace_id


@pytest.fixture
def store(tmp_path):
    s = ChdbStore(tmp_path)
    migrate(s)
    yield s
    s.close()


def test_spans_round_trip_as_records(store):
    sent = [span(1, 0, T0, **{"gen_ai.operation.name": "chat", "count": 3, "mast.run.end": True})]
    sent.append(span(1, 1, T0 + 5, 0, **{"mast.task.allowed_tools": ["a", "b"]}))
    exporter = ClickHouseExporter(store, 1000, 60)
    exporter.add_spans(sent)
    exporter.flush(0, force=True)
    back = [span_record(r) for r in queries.stored_spans(store, [trace_id(1)])]
    assert [b.span_id for b in back] == [s.span_id for s in sent]
    first, second = back
    assert first.start_ns == T0 and first.end_ns == sent[0].end_ns
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["count"] == "3"  # stored as text, as the OTel exporter stores it
    assert first.attributes["mast.run.end"] is True  # run attributes get their type back
    assert second.attributes["mast.task.allowed_tools"] == ["a", "b"]
    assert second.parent_span_id == first.span_id
    assert first.events[0].name == "note" and first.events[0].time_ns == T0 + 1
    assert first.links[0].attributes == {"why": "x"}
    assert first.resource_attributes == {"service.name": "svc"}
    assert first.kind == "Client" and first.status_code == "Ok"


def test_findings_and_signatures_round_trip(store):
    exporter = ClickHouseExporter(store, 1000, 60)
    exporter.add_findings([finding(1, 2, "FM-3.3", T0), finding(1, 3, "FM-1.3", T0 + 1)])
    exporter.add_signatures([signature(1, T0 + MINUTE, {"FM-3.3": 1, "FM-1.3": 1}, "failure")])
    exporter.flush(0, force=True)
    rows = {r["mode"]: r for r in queries.findings(store, queries.FindingFilter())}
    assert rows["FM-3.3"]["fatal"] == 1 and rows["FM-1.3"]["fatal"] == 0
    assert rows["FM-3.3"]["evidence"] == {"rule": "rule", "n": 2}
    assert rows["FM-3.3"]["cost_tokens"] == "15" or int(rows["FM-3.3"]["cost_tokens"]) == 15
    assert rows["FM-3.3"]["intervention"].startswith("Externalize verification")
    (sig,) = queries.signatures(store)
    assert sig["modes"] == ["FM-1.3", "FM-3.3"]
    assert sig["failure_vector"][MODE_CODES.index("FM-3.3")] == 1
    assert sig["fatal"] == 1 and sig["outcome"] == "failure"


def test_rollups_agree_with_the_base_tables(store):
    rng = random.Random(7)
    exporter = ClickHouseExporter(store, 50, 60)
    for trace in range(60):
        end = T0 + rng.randrange(10) * MINUTE
        modes = rng.sample(["FM-1.3", "FM-1.4", "FM-3.2", "FM-3.3"], rng.randrange(3))
        model = rng.choice(["m1", "m2"])
        found = [finding(trace, i, m, end - i, model=model) for i, m in enumerate(modes)]
        exporter.add_findings(found)
        exporter.add_signatures(
            [signature(trace, end, {m: 1 for m in modes}, rng.choice(["", "success"]), model)]
        )
        exporter.flush(0)
    exporter.flush(0, force=True)
    # A re-analysis writes some findings again: base FINAL and rollups both count them once.
    store.insert_arrow(
        "mast_findings", findings_table([finding(0, 0, "FM-1.3", T0), finding(0, 0, "FM-1.3", T0)])
    )
    base = store.query(
        "SELECT toUnixTimestamp(toStartOfMinute(toDateTime(Timestamp))) AS m, Mode, Model, "
        "Fatal, count() AS n, uniqExact(TraceId) AS runs FROM otel.mast_findings FINAL "
        "GROUP BY m, Mode, Model, Fatal ORDER BY m, Mode, Model, Fatal"
    )
    rolled = queries.findings_per_minute(
        store, queries.Scope(T0 - 10 * MINUTE), by=("mode", "model", "fatal")
    )
    assert [
        (r["minute_unix"], r["mode"], r["model"], r["fatal"], r["findings"], r["runs"])
        for r in rolled
    ] == [
        (int(b["m"]), b["Mode"], b["Model"], int(b["Fatal"]), int(b["n"]), int(b["runs"]))
        for b in base
    ]
    assert all(int(r["fatal"]) == fatal_prior(r["mode"]) for r in rolled)
    base_runs = store.query(
        "SELECT toUnixTimestamp(toStartOfMinute(toDateTime(End))) AS m, Outcome, count() AS n, "
        "sum(FindingCount) AS f, sum(Fatal) AS fatal FROM otel.mast_signatures FINAL "
        "GROUP BY m, Outcome ORDER BY m, Outcome"
    )
    runs = queries.runs_per_minute(store, queries.Scope(T0 - 10 * MINUTE), by=("outcome",))
    assert [
        (r["minute_unix"], r["outcome"], r["runs"], r["findings"], r["fatal_runs"]) for r in runs
    ] == [(int(b["m"]), b["Outcome"], int(b["n"]), int(b["f"]), int(b["fatal"])) for b in base_runs]
    assert sum(r["runs"] for r in runs) == 60


def test_the_same_batch_inserted_twice_with_its_token_is_stored_once(store):
    batch = spans_table([span(3, i, T0 + i) for i in range(10)])
    store.insert_arrow("otel_traces", batch, dedup_token="batch-1")
    store.insert_arrow("otel_traces", batch, dedup_token="batch-1")
    assert queries.span_counts(store)["spans"] == 10
    store.insert_arrow("otel_traces", batch, dedup_token="batch-2")  # a different batch
    assert queries.span_counts(store)["spans"] == 20
    # The dependent view saw the deduplicated insert once too.
    ids = store.query("SELECT count() AS n FROM otel.otel_traces_trace_id_ts")
    assert int(ids[0]["n"]) == 2
    # Signatures (and the runs rollup their view feeds, a sum) likewise.
    sigs = signatures_table([signature(3, T0, {"FM-1.3": 1})])
    store.insert_arrow("mast_signatures", sigs, dedup_token="sig-1")
    store.insert_arrow("mast_signatures", sigs, dedup_token="sig-1")
    runs = queries.runs_per_minute(store, queries.Scope(T0 - MINUTE))
    assert sum(r["runs"] for r in runs) == 1


class AckLostStore:
    """The store takes the batch, then the acknowledgement is lost (a connection reset after
    the server committed): the writer sees a transient error and retries."""

    def __init__(self, inner: ChdbStore, failures: int) -> None:
        self.inner = inner
        self.database = inner.database
        self.failures = failures
        self.tokens: list[str] = []

    def insert_arrow(self, table, data, dedup_token=""):
        self.tokens.append(dedup_token)
        self.inner.insert_arrow(table, data, dedup_token)
        if self.failures:
            self.failures -= 1
            raise StoreError("Code: 210. Connection reset by peer", transient=True)

    def execute(self, sql):
        self.inner.execute(sql)

    def query(self, sql):
        return self.inner.query(sql)

    def close(self):
        pass


def test_a_batch_retried_after_a_lost_acknowledgement_is_not_duplicated(store):
    flaky = AckLostStore(store, failures=2)
    waits: list[float] = []
    exporter = ClickHouseExporter(flaky, 1000, 60, RetryPolicy(4, 0.1, 0.15), sleep=waits.append)
    exporter.add_spans([span(4, i, T0 + i) for i in range(5)])
    exporter.flush(0, force=True)
    assert len(flaky.tokens) == 3 and len(set(flaky.tokens)) == 1
    assert waits == [0.1, 0.15]
    assert exporter.stats.retries == 2 and exporter.stats.write_errors == 0
    assert queries.span_counts(store)["spans"] == 5


def test_retries_run_out_and_the_rows_wait_for_the_next_flush(store):
    flaky = AckLostStore(store, failures=3)
    exporter = ClickHouseExporter(flaky, 1000, 60, RetryPolicy(2, 0, 0), sleep=lambda s: None)
    exporter.add_spans([span(6, i, T0 + i) for i in range(4)])
    with pytest.raises(StoreError):
        exporter.flush(0, force=True)
    assert exporter.buffered_rows == 4 and exporter.stats.write_errors == 1
    assert len(flaky.tokens) == 2 and len(set(flaky.tokens)) == 1  # retried with its token
    exporter.add_spans([span(7, 0, T0)])
    # A write reported failed may have landed: the buffered spans are looked up first, so
    # what the store already took is not written again.
    exporter.flush(0, force=True)
    assert exporter.buffered_rows == 0
    assert queries.span_counts(store) == {"spans": 5, "unique_spans": 5}


def test_a_permanent_error_is_not_retried(store):
    calls = []

    class Broken(AckLostStore):
        def insert_arrow(self, table, data, dedup_token=""):
            calls.append(table)
            raise StoreError("Code: 16. No such column", transient=False)

    exporter = ClickHouseExporter(Broken(store, 0), 1000, 60, RetryPolicy(5, 0, 0))
    exporter.add_spans([span(8, 0, T0)])
    with pytest.raises(StoreError):
        exporter.flush(0, force=True)
    assert calls == ["otel_traces"]


def test_an_outcome_posted_later_replaces_the_signature_and_moves_the_run(store):
    exporter = ClickHouseExporter(store, 1000, 60)
    exporter.add_signatures([signature(1, T0, {"FM-3.3": 1}), signature(2, T0, {}, "success")])
    exporter.flush(0, force=True)
    updated = record_outcome(store, trace_id(1), "failure", 0.25)
    assert updated.outcome == "failure" and updated.mode_counts == {"FM-3.3": 1}
    sig = queries.signatures(store, trace_id=trace_id(1))[0]
    assert (sig["outcome"], sig["score"], sig["modes"]) == ("failure", 0.25, ["FM-3.3"])
    record_outcome(store, trace_id(1), "success", 1.0)  # posted again: the newest wins
    assert queries.signatures(store, trace_id=trace_id(1))[0]["outcome"] == "success"
    runs = queries.runs_per_minute(store, queries.Scope(T0 - MINUTE), by=("outcome",))
    assert {r["outcome"]: r["runs"] for r in runs} == {"success": 2}
    assert len(queries.signatures(store)) == 2
    with pytest.raises(UnknownRun):
        record_outcome(store, trace_id(99), "failure")
    with pytest.raises(ValueError):
        record_outcome(store, trace_id(1), "maybe")


def test_partial_signatures_of_a_split_run_are_replaced_by_the_whole(store):
    """Two collectors each closed part of one run; the whole trace's signature replaces both
    in the runs rollup, and later versions keep it at one run, merges or not."""
    from mast_otel.collector.store.signatures import write_signature_versions

    first = ClickHouseExporter(store, 1000, 60)
    first.add_signatures([signature(5, T0, {"FM-1.3": 1})])
    first.flush(0, force=True)
    second = ClickHouseExporter(store, 1000, 60)
    second.add_signatures([signature(5, T0 + MINUTE, {}, "success")])
    second.flush(0, force=True)
    scope = queries.Scope(T0 - MINUTE)
    assert sum(r["runs"] for r in queries.runs_per_minute(store, scope)) == 2
    whole = signature(5, T0 + MINUTE, {"FM-1.3": 2, "FM-3.2": 1}, "success")
    assert write_signature_versions(store, [whole], keep_stored_outcome=False) == (1, 0)
    runs = queries.runs_per_minute(store, scope, by=("outcome",))
    assert [(r["outcome"], r["runs"], r["findings"], r["distinct_modes"]) for r in runs] == [
        ("success", 1, 3, 2)
    ]
    assert write_signature_versions(store, [whole]) == (0, 1)  # says the same: left alone
    for outcome in ("failure", "success", "failure"):
        record_outcome(store, trace_id(5), outcome)
        store.execute("OPTIMIZE TABLE otel.mast_signatures FINAL")
        store.execute("OPTIMIZE TABLE otel.mast_signature_counts FINAL")
    runs = queries.runs_per_minute(store, scope, by=("outcome",))
    assert [(r["outcome"], r["runs"], r["fatal_runs"]) for r in runs] == [("failure", 1, 0)]
    assert queries.signatures(store)[0]["modes"] == ["FM-1.3", "FM-3.2"]


def test_signatures_are_written_early_only_when_the_collector_is_idle(store):
    """A closed run's signature waits `eager_flush_interval_s`, not `flush_interval_s`, when
    nothing else is queued; a busy collector keeps its batches, and spans alone wait."""
    exporter = ClickHouseExporter(store, 1000, 60, eager_flush_interval_s=0.25)
    exporter.add_spans([span(1, 0, T0)])
    exporter.flush(0, force=True)  # the clock of the last write starts at 0
    exporter.add_spans([span(1, 1, T0)])
    assert exporter.flush(1.0, idle=True) is False  # spans alone are not hurried
    exporter.add_signatures([signature(1, T0 + MINUTE, {}, "success")])
    assert exporter.flush(1.0, idle=False) is False  # busy: wait for the interval
    assert exporter.flush(0.2, idle=True) is False  # idle, but not yet 0.25 s
    assert exporter.flush(1.0, idle=True) is True
    assert len(queries.signatures(store)) == 1
    assert store.query("SELECT count() AS n FROM otel.otel_traces")[0]["n"] == 2
    off = ClickHouseExporter(store, 1000, 60)
    off.add_spans([span(2, 0, T0)])
    off.flush(0, force=True)
    off.add_signatures([signature(2, T0 + MINUTE, {}, "success")])
    assert off.flush(5.0, idle=True) is False
