"""Backfill over stores filled through the live path (the real OpenTelemetry SDK over OTLP into a
running collector): the same findings as live, and running it again changes nothing. Also over
a store whose trace tables the OpenTelemetry Collector's ClickHouse exporter created."""

from __future__ import annotations

import io
import time

import pytest

from mast_otel.collector.cli import main
from mast_otel.collector.demo.dialects import DIALECTS
from mast_otel.collector.demo.runner import run_agents
from mast_otel.collector.reanalysis.backfill import ProgressBar, analyze_stored_traces, backfill
from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore, queries
from tests.storedata import EXPORTER_TRACES_SQL, run_sql_file
from tests.test_end_to_end import loopback_config

FINDING_KEYS = ("trace_id", "span_id", "mode", "rule", "evidence_span_ids", "evidence", "fatal")


def finding_set(store):
    rows = queries.findings(store, queries.FindingFilter(limit=100_000))
    return sorted(tuple(str(r[k]) for k in FINDING_KEYS) for r in rows)


def table_counts(store):
    out = {}
    for table in ("mast_findings", "mast_signatures", "otel_traces"):
        out[table] = int(store.query(f"SELECT count() AS n FROM otel.{table}")[0]["n"])
    out["runs_rollup"] = int(
        store.query("SELECT sum(Runs) AS n FROM otel.mast_runs_per_minute")[0]["n"]
    )
    out["findings_rollup"] = int(
        store.query("SELECT uniqExactMerge(Findings) AS n FROM otel.mast_findings_per_minute")[0][
            "n"
        ]
    )
    return out


@pytest.fixture(scope="module", params=["ours", "exporter-made"])
def live_store(request, tmp_path_factory):
    """A store the live path filled, and what it held right after."""
    config = loopback_config(tmp_path_factory.mktemp(f"backfill-{request.param}"))
    if request.param == "exporter-made":
        pre = ChdbStore(config.storage.data_dir)
        run_sql_file(pre, EXPORTER_TRACES_SQL)
        pre.close()
    started = time.time_ns()
    service = Service(config)
    service.start()
    try:
        runs = run_agents(service, "grpc", list(DIALECTS))
    finally:
        service.stop()
    store = ChdbStore(config.storage.data_dir)
    try:
        live = finding_set(store)
        counts = table_counts(store)
        signatures = {r["trace_id"]: r for r in queries.signatures(store, limit=10_000)}
    finally:
        store.close()
    return config, runs, live, counts, signatures, started


def test_backfill_finds_what_the_live_path_found_and_twice_changes_nothing(live_store):
    config, runs, live, counts, live_signatures, started = live_store
    assert live, "the demo scenarios raise findings"
    store = ChdbStore(config.storage.data_dir)
    try:
        trace_ids = [r.trace_id for r in runs]
        findings, signatures = analyze_stored_traces(store, config, trace_ids)
        assert len(signatures) == len(runs)
        assert sorted((f.trace_id, f.span_id, f.mode, f.rule) for f in findings) == sorted(
            (row[0], row[1], row[2], row[3]) for row in live
        )
        for sig in signatures:
            stored = live_signatures[sig.trace_id]
            assert sig.modes == stored["modes"]
            assert sig.outcome == stored["outcome"]
            assert sig.steps == int(stored["steps"])

        since, until = started - 60 * 10**9, time.time_ns() + 60 * 10**9
        first = backfill(store, config, since, until)
        assert first.traces == len(runs)
        assert first.findings_written == 0
        assert first.findings_already_stored == len(live)
        assert first.signatures_written == 0 and first.signatures_unchanged == len(runs)
        assert finding_set(store) == live and table_counts(store) == counts

        # From a store that lost its findings and signatures: backfill restores them, once.
        store.execute("TRUNCATE TABLE otel.mast_findings")
        store.execute("TRUNCATE TABLE otel.mast_signatures")
        store.execute("TRUNCATE TABLE otel.mast_findings_per_minute")
        store.execute("TRUNCATE TABLE otel.mast_runs_per_minute")
        store.execute("TRUNCATE TABLE otel.mast_signature_counts")
        second = backfill(store, config, since, until)
        assert second.findings_written == len(live) and second.signatures_written == len(runs)
        assert finding_set(store) == live
        third = backfill(store, config, since, until)
        assert third.findings_written == 0 and third.signatures_written == 0
        assert finding_set(store) == live and table_counts(store) == counts
        restored = {r["trace_id"]: r for r in queries.signatures(store, limit=10_000)}
        for trace, sig in live_signatures.items():
            assert restored[trace]["modes"] == sig["modes"]
            assert restored[trace]["outcome"] == sig["outcome"]
    finally:
        store.close()


def test_backfill_keeps_an_outcome_posted_after_the_run(live_store, tmp_path):
    config, runs, _, _, _, started = live_store
    from mast_otel.collector.store.signatures import record_outcome

    store = ChdbStore(config.storage.data_dir)
    try:
        run = next(r for r in runs if r.scenario.outcome == "success")
        record_outcome(store, run.trace_id, "failure", 0.1)  # the evaluator disagrees
        summary = backfill(store, config, started - 60 * 10**9, time.time_ns() + 60 * 10**9)
        assert summary.signatures_written == 0
        assert queries.signatures(store, trace_id=run.trace_id)[0]["outcome"] == "failure"
    finally:
        store.close()


def test_backfill_command_on_an_empty_range(live_store, capsys):
    config = live_store[0]
    code = main(
        [
            "backfill",
            "--data-dir",
            config.storage.data_dir,
            "--since",
            "2000-01-01T00:00:00",
            "--until",
            "2000-01-02T00:00:00",
        ]
    )
    assert code == 0
    out = capsys.readouterr()
    assert "analysed 0 traces" in out.out and out.err == ""


def test_progress_bar_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    piped, tty = io.StringIO(), Tty()
    for stream in (piped, tty):
        bar = ProgressBar(stream, width=10)
        bar(0, 4)
        bar(2, 4)
        bar(4, 4)
    assert piped.getvalue() == ""
    assert tty.getvalue().endswith("\r[##########] 4/4 traces\n")
    assert "\r[#####-----] 2/4 traces" in tty.getvalue()
