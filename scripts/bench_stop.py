"""How long each way of stopping `serve --workers N` takes under load, and what it stores:
`python scripts/bench_stop.py [--spans 20000] [--workers 2] [--load-s 3]`.

The benchmark fleet's requests (512 spans each) are sent over gRPC as fast as the collector
acknowledges them, from two threads; after `--load-s` seconds, with the senders still sending,
the collector is stopped: SIGTERM to its process, SIGTERM to its process group, SIGINT to the
group (Ctrl-C), and SIGTERM to the group twice (0.2 s apart). Prints, for each, the spans
acknowledged, the seconds from the signal to the exit, the stop's last line, and the spans
stored (after one more start when the stop left some in the spool)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.benchmarks.fleet import build_fleet
from tests.load import CollectorProcess, free_port, wait_until_idle
from tests.test_stops import RawSender, group_gone, stored_spans

STOPS = (
    ("own process, SIGTERM", signal.SIGTERM, False, False),
    ("process group, SIGTERM", signal.SIGTERM, True, False),
    ("process group, SIGINT (Ctrl-C)", signal.SIGINT, True, False),
    ("process group, SIGTERM twice", signal.SIGTERM, True, True),
)


def _ids(body: bytes) -> list[tuple[str, str]]:
    request = ExportTraceServiceRequest.FromString(body)
    return [
        (span.trace_id.hex(), span.span_id.hex())
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--load-s", type=float, default=3.0)
    args = parser.parse_args()
    for name, signum, group, twice in STOPS:
        fleet = build_fleet(args.spans)
        requests = [(body, _ids(body)) for body in fleet.requests]
        half = len(requests) // 2
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            config = root / "mast.yaml"
            config.write_text(f"pipeline:\n  workers: {args.workers}\n")
            collector = CollectorProcess(config, root / "data", free_port(), free_port())
            collector.new_group = True
            collector.start()
            assert collector.proc is not None
            pid = collector.proc.pid
            senders = [
                RawSender(collector.grpc_port, requests[:half]),
                RawSender(collector.grpc_port, requests[half:]),
            ]
            for sender in senders:
                sender.start()
            time.sleep(args.load_s)
            sending = sum(sender.is_alive() for sender in senders)
            signalled = time.monotonic()
            (os.killpg if group else os.kill)(pid, signum)
            if twice:
                time.sleep(0.2)
                (os.killpg if group else os.kill)(pid, signum)
            code = collector.proc.wait(timeout=120)
            took = time.monotonic() - signalled
            for sender in senders:
                sender.stop_event.set()
                sender.join(timeout=10)
            group_gone(pid, 10)
            acked = set().union(*(sender.acked for sender in senders))
            log = collector.logs[-1].read_text(errors="replace")
            last = [line for line in log.splitlines() if "stopped;" in line or "now;" in line]
            restarted = ""
            if not last or "stopped; everything accepted is stored" not in last[-1]:
                collector.new_group = False
                collector.start()
                wait_until_idle(collector, 120)
                collector.stop(timeout_s=120)
                restarted = " (after one more start)"
            stored = len(acked & stored_spans(collector.data_dir))
            print(
                f"{name}: {len(acked)} spans acknowledged ({sending} of 2 senders still sending), "
                f"exit {code} after {took:.1f} s; stored {stored} of them{restarted}\n"
                f"    {last[-1].split(' ', 4)[-1] if last else '(no last line)'}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
