"""Importers: files people already have, read as if their runs had been sent over OTLP.

Each module here reads one format and offers `FORMAT`, `recognises(head)` (the file's first
bytes, decompressed) and `read(path)`, which yields OTLP export requests (traces or logs) in a
dialect the collector already normalizes, so an imported run takes the one path every received
run takes (limits, redaction, normalize, window, detectors, store). A new format is a new
module here and nothing else.

Formats are recognised by content, in a fixed order, most specific first:
1. OTLP (`otlp`): OTLP/JSON names `resourceSpans` / `resourceLogs`; a file that is not JSON
   text is read as OTLP protobuf;
2. Codex CLI session files (`codex`): JSON lines whose first line is a rollout line
   (`{"timestamp", "type": "session_meta" | ..., "payload"}`);
3. team transcripts (`team`): AG2 / AutoGen group chats, Magentic-One logs, the Who&When
   files and the MAST dataset's envelope (see `team`);
4. OpenAI-style chat transcripts (`chat`): JSON or JSON lines of messages (`role`) or of runs
   holding them (`traj`, `messages`, `conversation`).
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from types import ModuleType

from mast_otel.collector.importers import chat, codex, otlp, team
from mast_otel.collector.importers.errors import ImportFormatError
from mast_otel.collector.otlp.files import OtlpRequest

__all__ = ["IMPORTERS", "ImportFormatError", "read_requests", "recognise"]

IMPORTERS: tuple[ModuleType, ...] = (otlp, codex, team, chat)
HEAD_BYTES = 65_536


def recognise(path: str) -> ModuleType:
    """The importer that reads this file; raises ImportFormatError for no known format."""
    head = _head(path)
    if not head.strip():
        raise ImportFormatError(f"{path}: empty file")
    for importer in IMPORTERS:
        if importer.recognises(head):
            return importer
    raise ImportFormatError(
        f"{path}: not a format mast-otel reads (OTLP JSON or protobuf, a Codex CLI session "
        f"file, a team transcript or an OpenAI-style chat transcript)"
    )


def read_requests(path: str) -> Iterator[OtlpRequest]:
    """The OTLP export requests the file's runs make, whatever its format."""
    importer = recognise(path)
    if importer is otlp:
        yield from otlp.read(path)
        return
    if _compressed(path):
        raise ImportFormatError(f"{path}: gzip is read for OTLP files only; gunzip it first")
    try:
        yield from importer.read(path)
    except RecursionError as exc:
        raise ImportFormatError(f"{path}: nested too deeply") from exc


def _compressed(path: str) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


def _head(path: str) -> bytes:
    if os.path.isdir(path):
        raise ImportFormatError(f"{path}: is a directory")
    if _compressed(path):
        try:
            with gzip.open(path, "rb") as handle:
                return handle.read(HEAD_BYTES)
        except (OSError, EOFError) as exc:
            raise ImportFormatError(f"{path}: cannot read: {exc}") from exc
    with open(path, "rb") as handle:
        return handle.read(HEAD_BYTES)
