"""The spool's guarantees hold with worker processes as with one: through a real `serve --workers`
fed by the OpenTelemetry SDK's gRPC exporter.

- `durability.resume_open_runs`: a SIGTERM leaves the runs still in progress in the spool, and
  the next start resumes them: a run cut by the stop is analysed whole, once.
- A run left open by a kill -9 counts its idle time from when its spans arrived, not from the
  restart: a start long after closes it as idle at once.
- `durability.run_eviction_ratio`: a run that never ends and has a span in every spool file is
  closed (`spool_full`) once the spool passes its share, and the spool shrinks instead of
  filling until every sender is refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider

from mast_otel.collector.store import ChdbStore
from tests.load import (
    AckRecorder,
    CollectorProcess,
    agent_run,
    free_port,
    sender_provider,
    wait_until_idle,
)

BASE = """
windows:
  grace_s: 0.3
  idle_timeout_s: {idle}
storage:
  flush_interval_s: 0.3
pipeline:
  workers: 2
"""


def collector_for(tmp_path: Path, extra: str = "", idle: float = 600) -> CollectorProcess:
    config = tmp_path / "mast.yaml"
    config.write_text(BASE.format(idle=idle) + extra)
    return CollectorProcess(config, tmp_path / "data", free_port(), free_port())


def sdk(collector: CollectorProcess) -> tuple[AckRecorder, TracerProvider]:
    recorder = AckRecorder(
        OTLPSpanExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True)
    )
    return recorder, sender_provider(recorder)


def open_run(tracer: Any, children: int) -> tuple[Any, str]:
    """A run whose root span is started and not ended: its children are exported, it is not."""
    root = tracer.start_span(
        "invoke_agent sre", attributes={"gen_ai.operation.name": "invoke_agent"}
    )
    context = trace.set_span_in_context(root)
    for step in range(children):
        tracer.start_span(
            "execute_tool kubectl",
            context=context,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "kubectl",
                "gen_ai.tool.call.arguments": f'{{"command": "kubectl describe pod p-{step}"}}',
                "gen_ai.tool.call.result": f"pod {step} ok",
            },
        ).end()
    return root, format(root.get_span_context().trace_id, "032x")


def until(what: Callable[[], Any], timeout_s: float, message: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(message)


def signatures_made(collector: CollectorProcess) -> int:
    return int(collector.health()["pipeline"]["signatures"])


def read_store(collector: CollectorProcess, sql: str) -> list[dict[str, Any]]:
    store = ChdbStore(collector.data_dir)
    try:
        return store.query(sql)
    finally:
        store.close()


def test_a_stop_keeps_open_runs_and_the_next_start_resumes_them(tmp_path: Path) -> None:
    collector = collector_for(tmp_path, "durability:\n  resume_open_runs: true\n")
    collector.start()
    recorder, provider = sdk(collector)
    tracer = provider.get_tracer("resume-test")
    try:
        finished = agent_run(tracer, 0, looping=True)
        root, cut = open_run(tracer, 3)
        assert provider.force_flush(30_000)
        assert len(recorder.acked) == 10
        wait_until_idle(collector)
        until(lambda: signatures_made(collector) >= 1, 20, "the finished run was not closed")
        assert collector.stop() == 0
        assert "1 open run(s) kept to resume" in collector.output()

        collector.start()
        root.end()
        assert provider.force_flush(30_000)
        assert len(recorder.acked) == 11
        wait_until_idle(collector)
        until(lambda: signatures_made(collector) >= 1, 20, "the resumed run was not closed")
        assert collector.stop() == 0
        assert "everything accepted is stored" in collector.logs[-1].read_text()
    finally:
        provider.shutdown()
        collector.ensure_stopped()

    rows = read_store(
        collector,
        "SELECT TraceId AS t, CloseReason AS r, Steps AS n, count() AS c "
        "FROM otel.mast_signatures FINAL GROUP BY TraceId, CloseReason, Steps ORDER BY t",
    )
    found = {row["t"]: (row["r"], int(row["n"]), int(row["c"])) for row in rows}
    assert found == {finished: ("root_ended", 7, 1), cut: ("root_ended", 4, 1)}, found
    spans = read_store(
        collector,
        f"SELECT count() AS n, uniqExact(SpanId) AS u FROM otel.otel_traces "
        f"WHERE TraceId = '{cut}'",
    )
    assert (int(spans[0]["n"]), int(spans[0]["u"])) == (4, 4)


def test_a_run_left_open_by_a_kill_counts_its_idle_time_from_its_arrival(tmp_path: Path) -> None:
    idle = 6.0
    collector = collector_for(tmp_path, idle=idle)
    collector.start()
    recorder, provider = sdk(collector)
    tracer = provider.get_tracer("idle-test")
    try:
        _root, lost = open_run(tracer, 3)  # its root is lost with its sender
        assert provider.force_flush(30_000)
        assert len(recorder.acked) == 3
        collector.kill()
        time.sleep(idle + 0.5)
        collector.start()
        ready = time.monotonic()
        until(
            lambda: signatures_made(collector) >= 1,
            idle,
            f"the run was not closed within {idle} s of the restart",
        )
        closed_after = time.monotonic() - ready
        assert collector.stop() == 0
    finally:
        provider.shutdown()
        collector.ensure_stopped()
    # Counted from the restart it would close only after the whole idle timeout.
    assert closed_after < idle / 2, closed_after
    rows = read_store(
        collector, "SELECT TraceId AS t, CloseReason AS r, Steps AS n FROM otel.mast_signatures"
    )
    assert [(row["t"], row["r"], int(row["n"])) for row in rows] == [(lost, "idle", 3)]


def test_a_run_that_never_ends_is_closed_when_the_spool_passes_its_share(tmp_path: Path) -> None:
    collector = collector_for(
        tmp_path,
        "durability:\n  max_spool_bytes: 400000\n  segment_bytes: 30000\n"
        "  run_eviction_ratio: 0.25\n",
    )
    collector.start()
    recorder, provider = sdk(collector)
    tracer = provider.get_tracer("eviction-test")
    try:
        root = tracer.start_span(
            "invoke_agent endless", attributes={"gen_ai.operation.name": "invoke_agent"}
        )
        endless = format(root.get_span_context().trace_id, "032x")
        context = trace.set_span_in_context(root)
        relieved = 0
        started = time.monotonic()
        number = 0
        while time.monotonic() - started < 60:
            # One step of the endless run and a finished run, in every export.
            tracer.start_span("execute_tool kubectl", context=context).end()
            agent_run(tracer, number, looping=False)
            number += 1
            if number % 20 == 0:
                assert provider.force_flush(30_000)
                relieved = int(collector.health()["pipeline"]["runs_closed_for_spool"])
                if relieved:
                    break
        assert relieved == 1, "the spool's relief never closed the endless run"
        root.end()
        assert provider.force_flush(30_000)
        wait_until_idle(collector)
        until(
            lambda: collector.health()["durability"]["bytes"] < 100_000,
            20,
            "the spool did not shrink below its share",
        )
        assert collector.stop() == 0
    finally:
        provider.shutdown()
        collector.ensure_stopped()
    assert recorder.failed_batches == 0
    rows = read_store(
        collector,
        f"SELECT CloseReason AS r FROM otel.mast_signatures FINAL WHERE TraceId = '{endless}'",
    )
    assert [row["r"] for row in rows] == ["spool_full"]


def test_a_killed_collector_leaves_no_worker_process_behind(tmp_path: Path) -> None:
    collector = collector_for(tmp_path)
    collector.start()
    try:
        workers = [w["pid"] for w in collector.health()["workers"]["workers"]]
        assert len(workers) == 2
        fork_server = int(Path(f"/proc/{workers[0]}/stat").read_text().rsplit(")", 1)[1].split()[1])
        collector.kill()
        left = until(
            lambda: not any(running(pid) for pid in [*workers, fork_server]) or None,
            10,
            f"worker processes {workers} or their fork server {fork_server} outlived the kill",
        )
        assert left
    finally:
        collector.ensure_stopped()


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
