"""Offline analysis: the same pipeline as `serve`, driven from OTLP files instead of sockets."""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from collector.config import Config
from collector.exporters.base import MemoryExporter
from collector.otlp.decode import decode_logs, decode_spans
from collector.otlp.jsonpb import read_otlp_file
from collector.pipeline import Pipeline
from processors.model import Finding


def analyze_files(config: Config, paths: Iterable[str]) -> list[Finding]:
    """Every finding in the runs the files hold. Files are read in order as one stream, and
    runs close at the end of input (timing rules use span timestamps, not arrival)."""
    exporter = MemoryExporter()
    pipeline = Pipeline(config, exporter, clock=lambda: 0.0)
    depth = config.receivers.max_value_depth
    for path in paths:
        for request in read_otlp_file(path):
            if isinstance(request, ExportLogsServiceRequest):
                pipeline.process_logs(decode_logs(request, max_value_depth=depth).records)
            else:
                pipeline.process_spans(decode_spans(request, max_value_depth=depth).records)
    pipeline.close_all()
    return exporter.findings
