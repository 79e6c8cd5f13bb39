"""kill -9 under load: nothing acknowledged is lost, nothing is stored twice, every run is
analysed from all its spans.

Two senders on the real OpenTelemetry SDK (BatchSpanProcessor → OTLPSpanExporter over gRPC,
with the exporter's own retries) send agent runs at a steady pace to `mast-otel serve`, which
is killed with SIGKILL at random moments and restarted over the same data directory. A wrapper
around the exporter remembers every span whose batch the collector acknowledged. At the end
every acknowledged span is in the store exactly once, every run has one signature, and every
run whose spans all arrived has the findings its script implies, however many times the
collector died while it was open.
"""

from __future__ import annotations

import os
import random
import re
import signal
import time
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from mast_otel.collector.store import ChdbStore
from tests.load import (
    AckRecorder,
    CollectorProcess,
    Sender,
    free_port,
    sender_provider,
    wait_until_idle,
)

KILLS = 22
# Bounds the whole test: kills stop early (at KILLS or this), the drain has its own limits.
# A restart takes 1-2 s on a quiet machine and up to 4 s on a loaded one: the bound leaves
# room for 20 kills either way.
KILL_PHASE_S = 120.0

CONFIG = """
windows:
  grace_s: 0.3
storage:
  flush_interval_s: 0.3
"""


@pytest.mark.parametrize("workers", [1, 3])
def test_kill_dash_nine_loses_nothing_acknowledged(tmp_path: Path, workers: int) -> None:
    """kill -9 of the collector (with its worker processes, when it has some)."""
    kill_and_check(tmp_path, workers, kill_workers=False)


def test_killing_single_workers_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """kill -9 of one worker process at a time, and now and then of the whole collector: a
    dead worker is started again and its runs rebuilt from the spool."""
    kill_and_check(tmp_path, 3, kill_workers=True)


def worker_pids(collector: CollectorProcess) -> list[int]:
    return [w["pid"] for w in collector.health()["workers"]["workers"] if w["alive"]]


def kill_and_check(tmp_path: Path, workers: int, *, kill_workers: bool) -> None:
    rng = random.Random(20240601 + workers + kill_workers)
    config_path = tmp_path / "mast.yaml"
    config_path.write_text(
        CONFIG + f"pipeline:\n  workers: {workers}\n  worker_max_restarts: {KILLS + 1}\n"
    )
    collector = CollectorProcess(config_path, tmp_path / "data", free_port(), free_port())
    collector.start()
    recorders, providers, senders = [], [], []
    for i in range(2):
        recorder = AckRecorder(
            OTLPSpanExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True)
        )
        provider = sender_provider(recorder)
        sender = Sender(provider.get_tracer("crash-test"), runs_per_second=12, name=f"sender-{i}")
        recorders.append(recorder)
        providers.append(provider)
        senders.append(sender)
        sender.start()
    kills = worker_kills = 0
    try:
        started = time.monotonic()
        while kills < KILLS and time.monotonic() - started < KILL_PHASE_S:
            time.sleep(rng.uniform(0.2, 1.6))
            if kill_workers and kills % 4 != 3:
                os.kill(rng.choice(worker_pids(collector)), signal.SIGKILL)
                worker_kills += 1
            else:
                collector.kill()
                collector.start()
            kills += 1
        for sender in senders:
            sender.stop_event.set()
        for sender in senders:
            sender.join(timeout=10)
        for provider in providers:
            assert provider.force_flush(60_000)
        wait_until_idle(collector)
        assert collector.stop() == 0
    finally:
        for provider in providers:
            provider.shutdown()
        collector.ensure_stopped()

    acked = set().union(*(r.acked for r in recorders))
    roots = set().union(*(r.roots for r in recorders))
    looping = {t: loop for s in senders for t, loop in s.looping.items()}
    store = ChdbStore(collector.data_dir)
    try:
        stored_rows = store.query(
            "SELECT TraceId AS t, SpanId AS s, count() AS n FROM otel.otel_traces "
            "GROUP BY TraceId, SpanId"
        )
        signatures = {
            row["t"]: row
            for row in store.query(
                "SELECT TraceId AS t, Steps AS steps, Modes AS modes, CloseReason AS reason, "
                "count() OVER (PARTITION BY TraceId) AS copies "
                "FROM otel.mast_signatures FINAL"
            )
        }
        findings = store.query(
            "SELECT TraceId AS t, Mode AS mode, count() AS n FROM otel.mast_findings FINAL "
            "GROUP BY TraceId, Mode"
        )
    finally:
        store.close()

    output = collector.output()
    replayed = sum(int(n) for n in re.findall(r"replay done: (\d+) request", output))
    rebuilt = sum(int(n) for n in re.findall(r"(\d+) run\(s\) rebuilt", output))
    if kill_workers:
        restarted = re.findall(r"worker \d+ restarted: (\d+) spooled request", output)
        print(f"\n{worker_kills} workers killed, replays to restarted workers: {restarted}")
        assert len(restarted) >= worker_kills - 2
        assert sum(int(n) for n in restarted) > 0
    print(
        f"\ncrash test: {kills} kills, {len(acked)} spans acknowledged in "
        f"{len({t for t, _ in acked})} runs, {replayed} requests replayed, "
        f"{rebuilt} open runs rebuilt from the spool, "
        f"{sum(r.failed_batches for r in recorders)} batches the SDK gave up on"
    )
    # Worker processes add an interpreter's start (the fork server's) to every restart.
    assert kills >= (20 if workers == 1 or kill_workers else 8)
    assert replayed > 0 and rebuilt > 0, "the kills never caught work in flight"

    stored = {(r["t"], r["s"]): int(r["n"]) for r in stored_rows}
    missing = acked - stored.keys()
    assert not missing, f"{len(missing)} acknowledged spans lost, e.g. {sorted(missing)[:3]}"
    twice = {k: n for k, n in stored.items() if n > 1}
    assert not twice, f"{len(twice)} spans stored more than once, e.g. {list(twice.items())[:3]}"

    traces = {t for t, _ in stored}
    unsigned = traces - signatures.keys()
    assert not unsigned, f"{len(unsigned)} runs without a signature, e.g. {sorted(unsigned)[:3]}"
    assert all(int(s["copies"]) == 1 for s in signatures.values())

    spans_per_trace: dict[str, int] = {}
    for t, _ in stored:
        spans_per_trace[t] = spans_per_trace.get(t, 0) + 1
    modes = {(f["t"], f["mode"]) for f in findings}
    complete = [t for t in roots if spans_per_trace.get(t) == 7]
    assert len(complete) > 0.8 * len(roots)
    for trace_id in complete:
        signature = signatures[trace_id]
        # Rebuilt from the spool, not from nothing: the run saw all seven spans once.
        assert int(signature["steps"]) == 7, (trace_id, signature)
        expected = ["FM-1.3"] if looping.get(trace_id) else []
        assert list(signature["modes"]) == expected, (trace_id, signature)
        assert ((trace_id, "FM-1.3") in modes) == bool(expected)


TERM_KILLS = 4
TERM_TEST_S = 50.0
# Rows wait up to 3 s for the store, so each kill leaves seconds of acknowledged requests
# unstored in the spool, for the next start to replay.
TERM_CONFIG = """
windows:
  grace_s: 0.3
storage:
  flush_interval_s: 3
  eager_flush_interval_s: 3
"""


@pytest.mark.parametrize("workers", [1, 3])
def test_sigterm_right_after_a_restart_stores_everything_acknowledged(
    tmp_path: Path, workers: int
) -> None:
    """kill -9 a few times under load, then SIGTERM the collector as soon as it answers after
    its last restart (while it replays what the kills left, with the senders still sending):
    the clean stop alone, with no later start, stores every acknowledged span (every worker
    drains)."""
    started = time.monotonic()
    rng = random.Random(20240602)
    config_path = tmp_path / "mast.yaml"
    config_path.write_text(TERM_CONFIG + f"pipeline:\n  workers: {workers}\n")
    collector = CollectorProcess(config_path, tmp_path / "data", free_port(), free_port())
    collector.start()
    recorders, providers, senders = [], [], []
    for i in range(2):
        recorder = AckRecorder(
            OTLPSpanExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True, timeout=2)
        )
        provider = sender_provider(recorder)
        sender = Sender(provider.get_tracer("crash-test"), runs_per_second=15, name=f"term-{i}")
        recorders.append(recorder)
        providers.append(provider)
        senders.append(sender)
        sender.start()
    try:
        for _ in range(TERM_KILLS):
            time.sleep(rng.uniform(1.5, 2.5))
            collector.kill()
            collector.start()
        # As soon as it answers: the replay of what the kills left is under way.
        code = collector.stop(timeout_s=40)
        for sender in senders:
            sender.stop_event.set()
        for sender in senders:
            sender.join(timeout=10)
    finally:
        collector.ensure_stopped()
        for provider in providers:
            provider.shutdown()
    assert code == 0

    acked = set().union(*(r.acked for r in recorders))
    last_log = collector.logs[-1].read_text(errors="replace")
    store = ChdbStore(collector.data_dir)
    try:
        stored = {
            (row["t"], row["s"])
            for row in store.query("SELECT TraceId AS t, SpanId AS s FROM otel.otel_traces")
        }
    finally:
        store.close()
    replayed = re.findall(r"replay done: (\d+) request\(s\) in ([\d.]+) s", last_log)
    print(
        f"\nSIGTERM after restart: {len(acked)} spans acknowledged, last start replayed "
        f"{replayed[-1] if replayed else 0} (requests, seconds); stop said: "
        f"{[line for line in last_log.splitlines() if 'stopped;' in line]}"
    )
    assert len(acked) > 500
    assert replayed and int(replayed[-1][0]) > 0, "the last start had nothing to replay"
    missing = acked - stored
    assert not missing, f"{len(missing)} acknowledged spans not stored, e.g. {sorted(missing)[:3]}"
    assert "stopped; everything accepted is stored" in last_log
    # And nothing is left to replay at the next start.
    assert (collector.data_dir / "spool").is_dir()
    assert not list((collector.data_dir / "spool").glob("*.wal"))
    assert time.monotonic() - started < TERM_TEST_S + 10
