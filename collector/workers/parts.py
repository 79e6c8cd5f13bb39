"""What the receiving process hands a worker: one request's part for that worker's shard,
behind a fixed header.

The header: the request's spool sequence number and segment, flags (replayed from the spool;
replayed and journaled as stored, so its rows are not written again), and the wall-clock second
the request arrived (for a replayed request, the last write of its spool segment: a rebuilt
run's idle time counts from there).
"""

from __future__ import annotations

import struct

from mast_otel.collector.spool import RecordKind
from mast_otel.collector.workers.route import Encoding, Signal

PART_HEADER = struct.Struct("<QQBd")
REPLAYED = 1
STORED = 2

SPOOL_KINDS: dict[tuple[str, str], RecordKind] = {
    ("traces", "protobuf"): RecordKind.TRACES_PROTOBUF,
    ("logs", "protobuf"): RecordKind.LOGS_PROTOBUF,
    ("traces", "json"): RecordKind.TRACES_JSON,
    ("logs", "json"): RecordKind.LOGS_JSON,
}
SIGNALS: dict[RecordKind, tuple[Signal, Encoding]] = {
    RecordKind.TRACES_PROTOBUF: ("traces", "protobuf"),
    RecordKind.LOGS_PROTOBUF: ("logs", "protobuf"),
    RecordKind.TRACES_JSON: ("traces", "json"),
    RecordKind.LOGS_JSON: ("logs", "json"),
}


def part(seq: int, segment: int, flags: int, arrived: float, body: bytes) -> bytes:
    """A part as a worker reads it: the header, then the shard's OTLP/protobuf request."""
    return b"".join((PART_HEADER.pack(seq, segment, flags, arrived), body))


def read_part(data: bytes) -> tuple[int, int, int, float, bytes]:
    """(seq, segment, flags, arrived, body) of a part."""
    seq, segment, flags, arrived = PART_HEADER.unpack_from(data)
    return seq, segment, flags, arrived, data[PART_HEADER.size :]
