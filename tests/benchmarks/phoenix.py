"""Side by side with Arize Phoenix: the same fleet, the same load generator, sent over OTLP/gRPC
to Phoenix (default SQLite) and to mast-otel, and both stored rates with their ratio.

Phoenix binds its gRPC port on every interface whatever it is told, so it runs in a private
network namespace with only loopback (`unshare -n`), and the load generator joins that
namespace (`nsenter -n`). Needs root and Phoenix in its own virtualenv:

    python3 -m venv /opt/phoenix && /opt/phoenix/bin/pip install arize-phoenix==20.26.1
    .venv/bin/python -m tests.benchmarks.phoenix --phoenix /opt/phoenix/bin/phoenix --spans 20000
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def stored_spans(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT count(*) FROM spans").fetchone()[0])
    except sqlite3.Error:
        return 0


def run_phoenix(phoenix: str, spans: int, threads: int, timeout: float) -> dict:
    work = Path(tempfile.mkdtemp(prefix="phoenix-bench-"))
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": "6006",
        "PHOENIX_GRPC_PORT": "4317",
    }
    log = (work / "phoenix.log").open("w")
    server = subprocess.Popen(
        ["unshare", "-n", "sh", "-c", f"ip link set lo up && exec {phoenix} serve"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        db = work / "phoenix.db"
        deadline = time.monotonic() + 180
        while "Application startup complete" not in (work / "phoenix.log").read_text():
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("Phoenix did not start: " + (work / "phoenix.log").read_text())
            time.sleep(0.5)
        out = work / "loadgen.json"
        started = time.time()
        subprocess.run(
            [
                "nsenter",
                "-t",
                str(server.pid),
                "-n",
                sys.executable,
                "-m",
                "tests.benchmarks.loadgen",
                "--transport",
                "grpc",
                "--endpoint",
                "127.0.0.1:4317",
                "--spans",
                str(spans),
                "--threads",
                str(threads),
                "--duration",
                str(timeout),
                "--out",
                str(out),
            ],
            cwd=ROOT,
            check=True,
        )
        sent = json.loads(out.read_text())
        deadline = time.monotonic() + timeout
        while stored_spans(db) < sent["acked_spans"] and time.monotonic() < deadline:
            time.sleep(1)
        stored = stored_spans(db)
        elapsed = time.time() - sent["started_wall"]
        peak = 0
        for line in Path(f"/proc/{server.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024
        del started
        return {
            "acked_spans": sent["acked_spans"],
            "stored_spans": stored,
            "stored_rate": stored / elapsed,
            "refusals": sent["refusals"],
            "peak_rss_mib": peak / 2**20,
        }
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phoenix", required=True, help="path to the phoenix executable")
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    phoenix = run_phoenix(args.phoenix, args.spans, args.threads, args.timeout)
    print(json.dumps({"phoenix": phoenix}, indent=2))
    mast = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.run", "--spans", str(args.spans)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    ours = json.loads(mast.stdout[mast.stdout.index("{") :])
    ratio = ours["e2e_rate"] / phoenix["stored_rate"] if phoenix["stored_rate"] else float("inf")
    print(
        f"stored spans/s: mast-otel {ours['e2e_rate']:,.0f}, Phoenix {phoenix['stored_rate']:,.0f}"
        f" ({ratio:,.1f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
