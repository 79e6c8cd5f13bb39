"""The write-ahead spool: every accepted request on disk before it is acknowledged.

A request's bytes (decompressed, as received) are appended to the current segment file with a
sequence number and a checksum, and the receiver acknowledges only after an fsync covers them.
Concurrent requests share fsyncs (group commit): while one fsync runs, the next requests are
written and the following fsync covers them all, so the cost per request falls as load rises.

The pipeline tells the spool what is done. Each record holds its segment open until its rows
are in the store; each open run holds open every segment with a record of it until the run is
closed and its findings and signature are stored. A segment no longer held is deleted. So after
a crash the segments left on disk hold every request whose rows may not be stored and every
record of every run that was still open: replaying them stores what was missing and rebuilds
those runs from their first span.

Beside each segment, a journal (`<segment>.done`) records, once durable in the store, which of
its requests are stored (`S <seq>`) and which runs it held are closed (`C <trace id>`), so a
replay skips rows already stored and does not reopen runs already closed.

Record layout (little-endian): magic u16, kind u8, reserved u8, payload length u32, sequence
u64, CRC-32 of kind + sequence + payload u32, then the payload. A torn record (a write the
process did not finish) ends its segment; every record before it is intact.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import struct
import threading
import time
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


class SpoolFull(Exception):
    """The spool is at `max_bytes` (or the disk refused the write); the sender should retry."""


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


class Spool:
    """Segments under `directory`. Thread-safe: receivers append, the pipeline releases."""

    def __init__(
        self,
        directory: str | Path,
        max_bytes: int,
        segment_bytes: int,
        *,
        fsync: bool = True,
        group_commit_s: float = 0.0,
    ) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self.group_commit_s = group_commit_s
        self.stats = SpoolStats()
        self._lock = threading.Lock()
        self._synced = threading.Condition(self._lock)
        self._segments: dict[int, _Segment] = {}
        self._active: _Segment | None = None
        self._fd = -1
        self._next_seq = 1
        self._written_seq = 0
        self._synced_seq = 0
        self._bytes = 0
        self._closed = False
        self._sync_error: OSError | None = None
        self._replay: list[_Segment] = []
        self._syncer: threading.Thread | None = None

    # -- opening and replay -------------------------------------------------------------------

    def open(self) -> Recovered:
        """Take over what a previous process left; returns its journals' verdicts. Call
        `replay` next to read the records, then append new ones."""
        self.directory.mkdir(parents=True, exist_ok=True)
        recovered = Recovered()
        wal = {int(p.stem): p for p in self.directory.glob(f"*{_SUFFIX}") if p.stem.isdigit()}
        for journal in self.directory.glob(f"*{_JOURNAL}"):
            if not journal.stem.isdigit() or int(journal.stem) not in wal:
                journal.unlink(missing_ok=True)
                continue
            _read_journal(journal, recovered)
        for segment_id in sorted(wal):
            path = wal[segment_id]
            size = path.stat().st_size
            if size == 0:
                path.unlink(missing_ok=True)
                path.with_suffix(_JOURNAL).unlink(missing_ok=True)
                continue
            segment = _Segment(segment_id, path, size=size, sealed=True, mtime=path.stat().st_mtime)
            # Held until replay has read it all.
            segment.refs = 1
            self._segments[segment_id] = segment
            self._replay.append(segment)
            self._bytes += size
            self._next_seq = max(self._next_seq, segment_id + 1)
        if self._replay:
            # Records are numbered in order across segments, so the newest segment holds the
            # highest number; new records must continue after it (journals name records by
            # number, and a reused number would mark an old record as stored).
            newest = self._replay[-1]
            for seq, _, _ in _read_records(newest.path, SpoolStats()):
                self._next_seq = max(self._next_seq, seq + 1)
        recovered.segments = len(self._replay)
        recovered.bytes = self._bytes
        if self.fsync:
            self._syncer = threading.Thread(target=self._sync_loop, name="mast-spool", daemon=True)
            self._syncer.start()
        return recovered

    def replay(self) -> Iterator[tuple[SpoolEntry, RecordKind, bytes]]:
        """Every intact record left by the previous process, oldest first. Each one holds its
        segment until `release`d, like a newly appended record."""
        while self._replay:
            segment = self._replay.pop(0)
            last_seq = segment.id - 1
            for seq, kind, payload in _read_records(segment.path, self.stats):
                with self._lock:
                    segment.refs += 1
                    segment.records += 1
                    self.stats.replayed_records += 1
                last_seq = seq
                yield SpoolEntry(seq, segment.id), kind, payload
            with self._lock:
                self._next_seq = max(self._next_seq, last_seq + 1)
            self.release(segment.id)

    @property
    def replaying(self) -> bool:
        return bool(self._replay)

    def written_at(self, segment_id: int) -> float | None:
        """When a segment left by the previous process was last written (wall clock seconds),
        if it is one."""
        with self._lock:
            segment = self._segments.get(segment_id)
            return segment.mtime if segment is not None and segment.mtime else None

    @property
    def replay_segments_left(self) -> int:
        """Segments left by the previous process not yet read by `replay`."""
        return len(self._replay)

    # -- appending ----------------------------------------------------------------------------

    def append(self, kind: RecordKind, payload: bytes) -> SpoolEntry:
        """Write one request and return once it is durable (per the fsync policy).

        Raises SpoolFull when the spool is at its bound or the disk refuses the write: nothing
        of the request is kept then, and the caller refuses it with a retryable status."""
        size = _HEADER.size + len(payload)
        with self._lock:
            if self._closed:
                raise SpoolFull("the spool is closed")
            if self._bytes + size > self.max_bytes:
                self.stats.refused_full += 1
                raise SpoolFull(
                    f"write-ahead spool is full ({self._bytes} of {self.max_bytes} bytes): "
                    "the store is behind or unreachable"
                )
            seq = self._next_seq
            try:
                segment = self._segment_for(size)
                header = _HEADER.pack(
                    _MAGIC, int(kind), 0, len(payload), seq, _checksum(kind, seq, payload)
                )
                self._write(segment, header + payload)
            except OSError as exc:
                self.stats.write_errors += 1
                log.error("cannot write to the spool in %s: %s", self.directory, exc)
                raise SpoolFull(f"cannot write to the spool: {exc.strerror or exc}") from exc
            self._next_seq = seq + 1
            self._written_seq = seq
            segment.refs += 1
            segment.records += 1
            self._bytes += size
            self.stats.appends += 1
            self.stats.append_bytes += size
            if self.fsync:
                self._synced.notify_all()
                while self._synced_seq < seq and not self._closed:
                    if self._sync_error is not None:
                        raise SpoolFull(f"cannot sync the spool: {self._sync_error}")
                    self._synced.wait(1.0)
                if self._synced_seq < seq:
                    raise SpoolFull("the spool closed before the request was on disk")
            return SpoolEntry(seq, segment.id)

    def _segment_for(self, size: int) -> _Segment:
        active = self._active
        if active is not None and active.size > 0 and active.size + size > self.segment_bytes:
            self._seal()
            active = None
        if active is None:
            seq = self._next_seq
            path = self.directory / f"{seq:020d}{_SUFFIX}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            if self.fsync:
                _fsync_directory(self.directory)
            active = _Segment(seq, path)
            # The active segment holds itself until sealed.
            active.refs = 1
            self._segments[seq] = active
            self._active = active
            self._fd = fd
        return active

    def _write(self, segment: _Segment, data: bytes) -> None:
        view = memoryview(data)
        written = 0
        try:
            while written < len(data):
                written += os.write(self._fd, view[written:])
        except OSError:
            # Leave no torn record behind a later good one: cut it off, or if even that
            # fails, end the segment here (a torn tail is where a segment's replay stops).
            try:
                os.ftruncate(self._fd, segment.size)
            except OSError:
                self._seal()
            raise
        segment.size += len(data)

    def _seal(self) -> None:
        """Close the active segment (under the lock): synced first, so every record in it is
        durable once it is sealed."""
        active = self._active
        if active is None:
            return
        if self.fsync:
            started = time.perf_counter()
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            self.stats.fsyncs += 1
            self.stats.fsync_seconds += time.perf_counter() - started
            self._synced_seq = self._written_seq
            self._synced.notify_all()
        os.close(self._fd)
        self._fd = -1
        self._active = None
        active.sealed = True
        active.refs -= 1
        self._maybe_delete(active)

    def _sync_loop(self) -> None:
        while True:
            with self._lock:
                while self._written_seq <= self._synced_seq and not self._closed:
                    self._synced.wait()
                if self._closed:
                    return
            if self.group_commit_s > 0:
                time.sleep(self.group_commit_s)
            with self._lock:
                if self._fd < 0:
                    continue
                target = self._written_seq
                fd = os.dup(self._fd)
            started = time.perf_counter()
            try:
                os.fsync(fd)
                error = None
            except OSError as exc:
                error = exc
            finally:
                os.close(fd)
            with self._lock:
                self.stats.fsyncs += 1
                self.stats.fsync_seconds += time.perf_counter() - started
                if error is not None:
                    log.error("fsync of the spool failed: %s", error)
                    self._sync_error = error
                else:
                    self._sync_error = None
                    self._synced_seq = max(self._synced_seq, target)
                self._synced.notify_all()
            if error is not None:
                time.sleep(0.1)

    # -- the pipeline's side ------------------------------------------------------------------

    def hold(self, segment_id: int, count: int = 1) -> None:
        """Keep a segment (an open run has a record in it)."""
        with self._lock:
            segment = self._segments.get(segment_id)
            if segment is not None:
                segment.refs += count

    def release(self, segment_id: int, count: int = 1) -> None:
        """Drop holds on a segment (a record's rows are stored, a run is closed and stored);
        a sealed segment nothing holds is deleted."""
        with self._lock:
            segment = self._segments.get(segment_id)
            if segment is None:
                return
            segment.refs -= count
            self._maybe_delete(segment)

    def journal(self, lines: dict[int, list[str]]) -> None:
        """Append verdicts to segments' journals, durably, before the holds they justify are
        released."""
        for segment_id, entries in lines.items():
            with self._lock:
                segment = self._segments.get(segment_id)
            if segment is None or not entries:
                continue
            path = segment.path.with_suffix(_JOURNAL)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                try:
                    os.write(fd, "".join(f"{line}\n" for line in entries).encode("ascii"))
                    if self.fsync:
                        os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                # The journal only saves work at replay; without it rows are checked against
                # the store instead.
                log.warning("cannot write the spool journal %s: %s", path, exc)

    def idle_rotate(self) -> None:
        """Seal the active segment if nothing but itself holds it, so a quiet collector does
        not keep an old, fully stored segment to replay at the next start."""
        with self._lock:
            active = self._active
            if active is not None and active.refs == 1 and active.size > 0:
                self._seal()

    def refs(self, segment_id: int) -> int:
        """How many holds keep this segment (records not yet stored, open runs, replay)."""
        with self._lock:
            segment = self._segments.get(segment_id)
            return segment.refs if segment is not None else 0

    def oldest_held(self) -> int | None:
        """The oldest segment still on disk (the one a long run may be pinning)."""
        with self._lock:
            sealed = [s.id for s in self._segments.values() if s.sealed]
        return min(sealed) if sealed else None

    def _maybe_delete(self, segment: _Segment) -> None:
        if not segment.sealed or segment.refs > 0:
            return
        self._segments.pop(segment.id, None)
        self._bytes -= segment.size
        self.stats.segments_deleted += 1
        with contextlib.suppress(OSError):
            segment.path.unlink()
        with contextlib.suppress(OSError):
            segment.path.with_suffix(_JOURNAL).unlink()

    # -- reading what is on disk while appending (a sharded collector's worker restart) ---------

    def read_live(self) -> Iterator[tuple[SpoolEntry, RecordKind, bytes]]:
        """Every intact record of every segment now on disk, oldest first, each segment held
        while it is read. The active segment is read up to its last complete record."""
        with self._lock:
            segments = sorted(self._segments.values(), key=lambda s: s.id)
            for segment in segments:
                segment.refs += 1
        try:
            for segment in segments:
                try:
                    for seq, kind, payload in _read_records(segment.path, SpoolStats()):
                        yield SpoolEntry(seq, segment.id), kind, payload
                except OSError as exc:
                    log.warning("cannot read spool segment %s: %s", segment.path, exc)
        finally:
            for segment in segments:
                self.release(segment.id)

    def oldest_segment(self) -> int | None:
        """The id (first sequence number) of the oldest segment on disk, sealed or not."""
        with self._lock:
            return min(self._segments) if self._segments else None

    def journaled(self) -> Recovered:
        """The journals of the segments now on disk: records stored, runs closed."""
        recovered = Recovered()
        with self._lock:
            paths = [s.path.with_suffix(_JOURNAL) for s in self._segments.values()]
        for path in paths:
            if path.exists():
                _read_journal(path, recovered)
        return recovered

    # -- state --------------------------------------------------------------------------------

    @property
    def bytes(self) -> int:
        return self._bytes

    @property
    def segments(self) -> int:
        return len(self._segments)

    def health(self) -> dict[str, object]:
        with self._lock:
            stats = vars(self.stats).copy()
            stats.update(
                bytes=self._bytes,
                max_bytes=self.max_bytes,
                segments=len(self._segments),
                replaying=bool(self._replay),
            )
        return stats

    def close(self) -> None:
        """Stop appending; what is on disk stays for the next start."""
        with self._lock:
            if self._closed:
                return
            if self._fd >= 0:
                if self.fsync:
                    with contextlib.suppress(OSError):
                        os.fsync(self._fd)
                    self._synced_seq = self._written_seq
                os.close(self._fd)
                self._fd = -1
            self._closed = True
            self._synced.notify_all()
        if self._syncer is not None:
            self._syncer.join(timeout=5.0)


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
