"""The spool's files: the record layout, the journals beside the segments, and reading
both back.

Record layout (little-endian): magic u16, kind u8, reserved u8, payload length u32, sequence
u64, CRC-32 of kind + sequence + payload u32, then the payload. A torn record (a write the
process did not finish) ends its segment; every record before it is intact.

A journal (`<segment>.done`) holds one line a verdict: `S <seq>` (that record's rows are
stored), `C <trace id>` (that run is closed and stored). A torn last line is ignored.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<HBBIQI")
_MAGIC = 0x5A17
_SUFFIX = ".wal"
_JOURNAL = ".done"
# A record claiming more than this is corrupt, not a request (receivers cap requests lower).
_MAX_RECORD_BYTES = 1 << 30
_TRACE_ID = re.compile(r"[0-9a-f]{32}")


class RecordKind(IntEnum):
    TRACES_PROTOBUF = 1
    LOGS_PROTOBUF = 2
    TRACES_JSON = 3
    LOGS_JSON = 4


@dataclass(frozen=True, slots=True)
class SpoolEntry:
    seq: int
    # The id of the segment holding the record (the sequence number of its first record).
    segment: int


@dataclass(slots=True)
class _Segment:
    id: int
    path: Path
    size: int = 0
    refs: int = 0
    sealed: bool = False
    records: int = 0
    # When the file was last written (left by a previous process): no record in it arrived
    # later.
    mtime: float = 0.0


@dataclass
class SpoolStats:
    appends: int = 0
    append_bytes: int = 0
    fsyncs: int = 0
    fsync_seconds: float = 0.0
    refused_full: int = 0
    write_errors: int = 0
    segments_deleted: int = 0
    replayed_records: int = 0
    torn_records: int = 0


@dataclass
class Recovered:
    """What a previous process left: the journals' verdicts, read before the replay."""

    stored: set[int] = field(default_factory=set)
    closed: set[str] = field(default_factory=set)
    segments: int = 0
    bytes: int = 0


def _checksum(kind: int, seq: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(struct.pack("<BQ", kind, seq))) & 0xFFFFFFFF


def _read_records(path: Path, stats: SpoolStats) -> Iterator[tuple[int, RecordKind, bytes]]:
    try:
        handle = path.open("rb")
    except OSError as exc:
        log.error("cannot read spool segment %s: %s", path, exc)
        return
    with handle:
        offset = 0
        while True:
            header = handle.read(_HEADER.size)
            if not header:
                return
            problem = ""
            if len(header) < _HEADER.size:
                problem = "torn header"
            else:
                magic, kind, _, length, seq, crc = _HEADER.unpack(header)
                if magic != _MAGIC or length > _MAX_RECORD_BYTES:
                    problem = "bad header"
                else:
                    payload = handle.read(length)
                    if len(payload) < length:
                        problem = "torn payload"
                    elif _checksum(kind, seq, payload) != crc:
                        problem = "checksum mismatch"
                    else:
                        try:
                            record_kind = RecordKind(kind)
                        except ValueError:
                            problem = f"unknown record kind {kind}"
            if problem:
                stats.torn_records += 1
                log.warning(
                    "spool segment %s ends in an incomplete record at byte %d (%s); the "
                    "records before it are replayed (a request never acknowledged)",
                    path.name,
                    offset,
                    problem,
                )
                return
            offset += _HEADER.size + length
            yield seq, record_kind, payload


def _read_journal(path: Path, recovered: Recovered) -> None:
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        log.warning("cannot read spool journal %s: %s", path, exc)
        return
    lines = text.split("\n")
    # The last line is complete only if the text ends with a newline: a torn write is ignored
    # (its verdict is simply not known, which costs a check, never data).
    for line in lines[:-1]:
        tag, _, value = line.partition(" ")
        if tag == "S" and value.isdigit():
            recovered.stored.add(int(value))
        elif tag == "C" and _TRACE_ID.fullmatch(value):
            recovered.closed.add(value)


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
