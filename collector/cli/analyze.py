"""`analyze` (the detectors over files, nothing stored) and `import` (files' runs stored as
if sent)."""

from __future__ import annotations

import argparse
import sys

from mast_otel.collector.cli.common import config_from_args
from mast_otel.collector.cli.output import print_findings
from mast_otel.collector.config import load_config


def cmd_analyze(args: argparse.Namespace) -> int:
    from mast_otel.collector.analyze import analyze_files

    config = load_config(args.config)
    findings = analyze_files(config, args.files)
    rows = [
        {
            "trace_id": f.trace_id,
            "span_id": f.span_id,
            "mode": f.mode,
            "rule": f.rule,
            "confidence": f.confidence,
            "detector": f.detector,
            "detector_version": f.detector_version,
            "message": f.message,
            "evidence_span_ids": list(f.evidence_span_ids),
            "evidence": f.evidence,
            "service": f.service,
            "agent": f.agent,
            "model": f.model,
            "time_unix_nano": f.time_ns,
        }
        for f in findings
    ]
    print_findings(rows, args.output)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from mast_otel.collector.analyze import ImportProgress, import_files

    config = config_from_args(args)
    progress = ImportProgress(sys.stderr)
    try:
        summary = import_files(config, args.files, progress=progress)
    finally:
        progress.done()
    storage = config.storage
    where = storage.clickhouse.url if storage.backend == "clickhouse" else storage.data_dir
    modes = ", ".join(f"{m} {n}" for m, n in sorted(summary.findings_by_mode.items()))
    print(
        f"imported {summary.runs} runs ({summary.spans} spans"
        + (f", {summary.logs} log records" if summary.logs else "")
        + f") from {summary.files} file(s) into {where}: {summary.findings} findings"
        + (f" ({modes})" if modes else "")
        + f", {summary.signatures} run signatures"
    )
    return 0
