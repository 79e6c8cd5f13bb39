"""Every way of stopping `serve --workers 2` under load: the collector's own process (what
Kubernetes and `docker stop` send), the whole process group (systemd's `KillMode=control-group`,
`kill -- -PGID`), Ctrl-C (SIGINT to the foreground group) and a second signal, meaning "now".

Three senders send agent runs over gRPC (requests of 252 spans, as fast as the collector
acknowledges them) and remember every span it acknowledged. The collector runs as the leader
of its own process group, as under a supervisor or in a terminal, so its fork server and
workers get a group's signal too.
Each stop must exit within 10 s, print one line for the signal and no traceback, restart no
worker, and either store everything acknowledged or say what stays in the spool; a second start
then stores the rest. A second signal exits at once, and everything acknowledged is stored by
the next start.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel.collector.store import ChdbStore
from tests.load import CollectorProcess, free_port, wait_until_idle

CONFIG = """
windows:
  grace_s: 0.3
storage:
  flush_interval_s: 0.3
pipeline:
  workers: 2
"""
LOAD_S = 2.5
# Each sender sends requests of 252 spans (36 runs) as fast as they are acknowledged: more
# than two workers analyse on two cores, so their queues are full when the signal comes.
SENDERS = 3
REQUESTS = 120
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


def run_requests(count: int, runs: int) -> list[tuple[bytes, list[tuple[str, str]]]]:
    """`count` OTLP requests of `runs` agent runs each (a root and six tool calls, GenAI
    conventions), with their (trace, span) ids."""
    requests = []
    for _ in range(count):
        request = ExportTraceServiceRequest()
        resource = request.resource_spans.add()
        attribute = resource.resource.attributes.add()
        attribute.key, attribute.value.string_value = "service.name", "stop-test"
        spans = resource.scope_spans.add().spans
        ids = []
        now = time.time_ns()
        for _ in range(runs):
            trace_id, root_id = os.urandom(16), os.urandom(8)
            for step in range(7):
                span = spans.add()
                span.trace_id = trace_id
                span.span_id = root_id if step == 0 else os.urandom(8)
                span.parent_span_id = b"" if step == 0 else root_id
                span.start_time_unix_nano = now + step * 1_000_000
                span.end_time_unix_nano = now + (8 if step == 0 else step + 1) * 1_000_000
                for key, value in (
                    ("gen_ai.operation.name", "invoke_agent" if step == 0 else "execute_tool"),
                    ("gen_ai.tool.name", "kubectl"),
                    ("gen_ai.tool.call.arguments", f'{{"command": "kubectl get pods -n s{step}"}}'),
                    ("gen_ai.tool.call.result", f"pod {step} ok"),
                ):
                    attribute = span.attributes.add()
                    attribute.key, attribute.value.string_value = key, value
                span.name = "invoke_agent sre" if step == 0 else "execute_tool kubectl"
                ids.append((trace_id.hex(), span.span_id.hex()))
        requests.append((request.SerializeToString(), ids))
    return requests


class RawSender(threading.Thread):
    """Sends prepared requests over gRPC as fast as they are acknowledged, until stopped;
    remembers the spans of every acknowledged request."""

    def __init__(self, port: int, requests: list[tuple[bytes, list[tuple[str, str]]]]) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.requests = requests
        self.stop_event = threading.Event()
        self.acked: set[tuple[str, str]] = set()

    def run(self) -> None:
        with grpc.insecure_channel(f"127.0.0.1:{self.port}") as channel:
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                request_serializer=None,
                response_deserializer=None,
            )
            for body, ids in self.requests:
                if self.stop_event.is_set():
                    return
                while not self.stop_event.is_set():
                    try:
                        export(body, timeout=5)
                    except grpc.RpcError:
                        time.sleep(0.2)
                        continue
                    self.acked.update(ids)
                    break


def stop_under_load(
    tmp_path: Path,
    signum: int,
    *,
    group: bool,
    twice: bool = False,
    extra: str = "",
    still_sending: bool = True,
    requests: int = REQUESTS,
    load_s: float = LOAD_S,
) -> tuple[CollectorProcess, set[tuple[str, str]], float, int]:
    """Runs the collector under load (as fast as it acknowledges), signals it, and returns it
    with the spans acknowledged, the seconds from the first signal to its exit and its exit
    code."""
    config = tmp_path / "mast.yaml"
    config.write_text(CONFIG + extra)
    collector = CollectorProcess(config, tmp_path / "data", free_port(), free_port())
    collector.new_group = True
    senders = [RawSender(collector.grpc_port, run_requests(requests, 36)) for _ in range(SENDERS)]
    collector.start()
    assert collector.proc is not None
    pid = collector.proc.pid
    try:
        for sender in senders:
            sender.start()
        time.sleep(load_s)
        send = (lambda: os.killpg(pid, signum)) if group else (lambda: os.kill(pid, signum))
        signalled = time.monotonic()
        send()
        if twice:
            time.sleep(0.2)
            send()
        code = collector.proc.wait(timeout=60)
        took = time.monotonic() - signalled
        # Still sending when the signal came: the load was on.
        assert not still_sending or all(sender.is_alive() for sender in senders)
        for sender in senders:
            sender.stop_event.set()
        for sender in senders:
            sender.join(timeout=10)
        # Nothing of the collector outlives it: no fork server, no worker.
        assert group_gone(pid, 10), "a process of the collector's group is still running"
    finally:
        collector.ensure_stopped()
    acked = set().union(*(sender.acked for sender in senders))
    return collector, acked, took, code


def check_stored(collector: CollectorProcess, acked: set[tuple[str, str]]) -> str:
    """Everything acknowledged is stored, now or after one more start (which the stop's last
    line must have announced). Returns that line."""
    log = collector.logs[-1].read_text(errors="replace")
    lines = [line for line in log.splitlines() if "stopped;" in line or "stopping now" in line]
    assert len(lines) == 1, log[-3000:]
    if "stopped; everything accepted is stored" not in lines[0]:
        assert "stay in the spool" in lines[0] or "the spool keeps" in lines[0], lines[0]
        collector.new_group = False
        collector.start()
        wait_until_idle(collector)
        assert collector.stop(timeout_s=60) == 0
        assert "stopped; everything accepted is stored" in collector.logs[-1].read_text()
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


def test_a_stop_whose_drain_time_runs_out_says_what_stays_in_the_spool(tmp_path: Path) -> None:
    """`pipeline.stop_drain_s` bounds how long the workers process what they were given: the
    rest, and every run still open, stays in the spool, the last line says how much and why,
    and the next start stores it all."""
    # Worker queues far past the default, so a backlog is there to be left whatever the
    # machine's speed.
    extra = (
        "  stop_drain_s: 0.05\n"
        "  worker_queue_max_requests: 1000\n"
        "  worker_queue_max_bytes: 536870912\n"
    )
    # The senders may be done when the signal comes (their requests all acknowledged and
    # queued): the backlog is what counts here.
    collector, acked, took, code = stop_under_load(
        tmp_path,
        signal.SIGTERM,
        group=True,
        extra=extra,
        still_sending=False,
        requests=40,
        load_s=1.0,
    )
    output = collector.logs[0].read_text(errors="replace")
    line = check_stored(collector, acked)
    print(f"\ndrain time out: {len(acked)} spans acknowledged, exited after {took:.1f} s: {line}")
    assert code == 0, output[-3000:]
    assert took < STOP_WITHIN_S, output[-3000:]
    assert "accepted request(s) not processed" in line and "stop_drain_s" in line, line
    assert "open run(s) kept to resume" in line, line
    # Every run was analysed once, from all its seven spans, its stop and restart between.
    store = ChdbStore(collector.data_dir)
    try:
        rows = store.query(
            "SELECT TraceId AS t, Steps AS n, count() AS c FROM otel.mast_signatures FINAL "
            "GROUP BY TraceId, Steps"
        )
    finally:
        store.close()
    runs = {row["t"]: (int(row["n"]), int(row["c"])) for row in rows}
    traces = {trace for trace, _ in acked}
    assert set(runs) >= traces
    assert {runs[trace] for trace in traces} == {(7, 1)}
