"""Offline analysis and import: the same pipeline as `serve`, driven from files instead of
sockets. Files are read by the importer their content calls for (`collector.importers`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TextIO

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from mast_otel.collector.config import Config
from mast_otel.collector.importers import otlp, read_requests, recognise
from mast_otel.collector.otlp.decode import decode_logs, decode_spans
from mast_otel.collector.pipeline import Pipeline
from mast_otel.collector.store import StoreError
from mast_otel.collector.store.exporter import Exporter, MemoryExporter
from mast_otel.processors.model import Finding

# Imported runs are written to the store every this many closed runs (and when the
# exporter's buffer is full), so memory holds a bounded backlog.
FLUSH_EVERY_RUNS = 100

# Called after each request: (path, runs read so far in it, spans read so far in it).
Progress = Callable[[str, int, int], None]


@dataclass
class ImportSummary:
    files: int = 0
    runs: int = 0
    spans: int = 0
    logs: int = 0
    findings: int = 0
    signatures: int = 0
    findings_by_mode: dict[str, int] = field(default_factory=dict)


def run_files(
    config: Config,
    paths: Iterable[str],
    exporter: Exporter,
    progress: Progress | None = None,
) -> tuple[Pipeline, ImportSummary]:
    """Feed every file's runs through a pipeline writing to `exporter`, then close every run.
    Runs close at the end of input (timing rules use span timestamps, not arrival)."""
    pipeline = Pipeline(config, exporter, clock=lambda: 0.0)
    depth = config.receivers.max_value_depth
    summary = ImportSummary()
    flushed = 0
    for path in paths:
        summary.files += 1
        runs = spans = 0
        # Transcript importers yield each run whole, in one request: it can be closed and
        # analysed at once, so memory holds one run. OTLP files may split a run across
        # requests: their runs close at the end of input.
        whole_runs = recognise(path) is not otlp
        for request in read_requests(path):
            if isinstance(request, ExportLogsServiceRequest):
                logs = decode_logs(request, max_value_depth=depth).records
                summary.logs += len(logs)
                pipeline.process_logs(logs)
            else:
                records = decode_spans(request, max_value_depth=depth).records
                spans += len(records)
                runs += len({record.trace_id for record in records})
                pipeline.process_spans(records)
                if whole_runs:
                    pipeline.close_finished()
            if exporter.full or pipeline.stats.signatures - flushed >= FLUSH_EVERY_RUNS:
                exporter.flush(time.monotonic(), force=True)
                flushed = pipeline.stats.signatures
            if progress is not None:
                progress(path, runs, spans)
        summary.runs += runs
        summary.spans += spans
    pipeline.close_all()
    summary.findings = pipeline.stats.findings
    summary.signatures = pipeline.stats.signatures
    summary.findings_by_mode = dict(pipeline.stats.findings_by_mode)
    return pipeline, summary


def analyze_files(config: Config, paths: Iterable[str]) -> list[Finding]:
    """Every finding in the runs the files hold, nothing stored."""
    exporter = MemoryExporter()
    run_files(config, paths, exporter)
    return exporter.findings


def import_files(
    config: Config, paths: Iterable[str], progress: Progress | None = None
) -> ImportSummary:
    """Store the files' runs as if they had been sent: spans (and logs), findings, signatures
    with their outcomes, in the configured store. Spans already stored are not stored again
    (looked up by trace and span id), so importing a file twice changes nothing."""
    from mast_otel.collector.service import prepare_store
    from mast_otel.collector.store import open_store
    from mast_otel.collector.store.batching import ClickHouseExporter

    storage = config.storage
    store = open_store(storage)
    try:
        prepare_store(store, config)
        exporter = ClickHouseExporter.of(store, storage, eager=False)
        _, summary = run_files(config, paths, exporter, progress)
        if not exporter.flush(0.0, force=True):
            raise StoreError(
                f"the store did not take every row ({exporter.buffered_rows} still buffered)"
            )
    finally:
        store.close()
    return summary


class ImportProgress:
    """A one-line progress bar per file on a terminal; plain counts, one line per file,
    otherwise (a pipe, a log file, CI)."""

    def __init__(self, stream: TextIO | None = None, every: int = 1) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = max(1, every)
        self.current = ""
        self.counts = (0, 0)

    def __call__(self, path: str, runs: int, spans: int) -> None:
        if path != self.current:
            self.done()
            self.current = path
        self.counts = (runs, spans)
        if self.tty and runs % self.every == 0:
            spin = "#" * min(30, runs % 31)
            self.stream.write(f"\r{path}: [{spin:<30}] {runs} runs, {spans} spans")
            self.stream.flush()

    def done(self) -> None:
        """End the current file's line."""
        if not self.current:
            return
        runs, spans = self.counts
        prefix = "\r" if self.tty else ""
        self.stream.write(f"{prefix}{self.current}: {runs} runs, {spans} spans read{' ' * 20}\n")
        self.stream.flush()
        self.current = ""
