"""Every way of stopping `serve --workers 2` under load: the collector's own process (what
Kubernetes and `docker stop` send), the whole process group (systemd's `KillMode=control-group`,
`kill -- -PGID`), Ctrl-C (SIGINT to the foreground group) and a second signal, meaning "now".

Two senders on the real OpenTelemetry SDK send agent runs over gRPC; a wrapper remembers every
span the collector acknowledged. The collector runs as the leader of its own process group, as
under a supervisor or in a terminal, so its fork server and workers get a group's signal too.
Each stop must exit within 10 s, print one line for the signal and no traceback, restart no
worker, and either store everything acknowledged or say what stays in the spool; a second start
then stores the rest. A second signal exits at once, and everything acknowledged is stored by
the next start.
"""

from __future__ import annotations

import os
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

CONFIG = """
windows:
  grace_s: 0.3
storage:
  flush_interval_s: 0.3
pipeline:
  workers: 2
"""
LOAD_S = 4.0
RUNS_PER_SECOND = 40  # per sender, 7 spans a run: about 560 spans/s from two senders
STOP_WITHIN_S = 10.0


def stored_spans(data_dir: Path) -> set[tuple[str, str]]:
    store = ChdbStore(data_dir)
    try:
        return {
            (row["t"], row["s"])
            for row in store.query("SELECT TraceId AS t, SpanId AS s FROM otel.otel_traces")
        }
    finally:
        store.close()


def group_gone(pgid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def stop_under_load(
    tmp_path: Path, signum: int, *, group: bool, twice: bool = False
) -> tuple[CollectorProcess, set[tuple[str, str]], float, int]:
    """Runs the collector under load, signals it, and returns it with the spans acknowledged,
    the seconds from the first signal to its exit and its exit code."""
    config = tmp_path / "mast.yaml"
    config.write_text(CONFIG)
    collector = CollectorProcess(config, tmp_path / "data", free_port(), free_port())
    collector.new_group = True
    collector.start()
    assert collector.proc is not None
    pid = collector.proc.pid
    recorders, providers, senders = [], [], []
    for i in range(2):
        recorder = AckRecorder(
            OTLPSpanExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True, timeout=2)
        )
        provider = sender_provider(recorder)
        sender = Sender(provider.get_tracer("stop-test"), RUNS_PER_SECOND, name=f"stop-{i}")
        recorders.append(recorder)
        providers.append(provider)
        senders.append(sender)
        sender.start()
    try:
        time.sleep(LOAD_S)
        send = (lambda: os.killpg(pid, signum)) if group else (lambda: os.kill(pid, signum))
        signalled = time.monotonic()
        send()
        if twice:
            time.sleep(0.5)
            send()
        code = collector.proc.wait(timeout=60)
        took = time.monotonic() - signalled
        for sender in senders:
            sender.stop_event.set()
        for sender in senders:
            sender.join(timeout=10)
        # Nothing of the collector outlives it: no fork server, no worker.
        assert group_gone(pid, 10), "a process of the collector's group is still running"
    finally:
        collector.ensure_stopped()
        for provider in providers:
            provider.shutdown()
    acked = set().union(*(r.acked for r in recorders))
    return collector, acked, took, code


def check_stored(collector: CollectorProcess, acked: set[tuple[str, str]]) -> str:
    """Everything acknowledged is stored, now or after one more start (which the stop's last
    line must have announced). Returns that line."""
    log = collector.logs[-1].read_text(errors="replace")
    lines = [line for line in log.splitlines() if "stopped;" in line or "stopping now" in line]
    assert len(lines) == 1, log[-3000:]
    if "everything accepted is stored" not in lines[0]:
        assert "stay in the spool" in lines[0] or "the spool keeps" in lines[0], lines[0]
        collector.new_group = False
        collector.start()
        wait_until_idle(collector)
        assert collector.stop(timeout_s=60) == 0
        assert "everything accepted is stored" in collector.logs[-1].read_text()
    missing = acked - stored_spans(collector.data_dir)
    assert not missing, f"{len(missing)} acknowledged spans not stored, e.g. {sorted(missing)[:3]}"
    return lines[0]


@pytest.mark.parametrize(
    ("name", "signum", "group"),
    [
        ("own process, SIGTERM", signal.SIGTERM, False),
        ("process group, SIGTERM", signal.SIGTERM, True),
        ("Ctrl-C, SIGINT to the group", signal.SIGINT, True),
    ],
    ids=["process", "group", "ctrl-c"],
)
def test_a_stop_drains_in_seconds_and_stores_everything_acknowledged(
    tmp_path: Path, name: str, signum: int, group: bool
) -> None:
    collector, acked, took, code = stop_under_load(tmp_path, signum, group=group)
    output = collector.logs[0].read_text(errors="replace")
    line = check_stored(collector, acked)
    print(f"\n{name}: {len(acked)} spans acknowledged, exited after {took:.1f} s: {line}")
    assert code == 0, output[-3000:]
    assert len(acked) > 1000
    assert took < STOP_WITHIN_S, output[-3000:]
    assert output.count("received SIG") == 1, output[-3000:]
    for sign in ("Traceback", "KeyboardInterrupt", "died", "starting it again", "terminated"):
        assert sign not in output, output[-3000:]


def test_a_second_signal_stops_at_once_and_the_spool_keeps_what_was_acknowledged(
    tmp_path: Path,
) -> None:
    collector, acked, took, code = stop_under_load(tmp_path, signal.SIGTERM, group=True, twice=True)
    output = collector.logs[0].read_text(errors="replace")
    line = check_stored(collector, acked)
    print(f"\nsecond SIGTERM: {len(acked)} spans acknowledged, exited after {took:.1f} s: {line}")
    assert code == 128 + signal.SIGTERM, output[-3000:]
    assert len(acked) > 1000
    # 0.5 s between the two signals, then at once.
    assert took < 2.5, output[-3000:]
    assert "stopping now" in output and "Traceback" not in output, output[-3000:]
