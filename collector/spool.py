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

The record layout and the journals' format are in `spool_format`; reading back what is on disk
(at start, and while appending) in `spool_replay`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path

from mast_otel.collector.spool_format import (
    _HEADER,
    _JOURNAL,
    _MAGIC,
    _SUFFIX,
    RecordKind,
    Recovered,
    SpoolEntry,
    SpoolStats,
    _checksum,
    _fsync_directory,
    _Segment,
)
from mast_otel.collector.spool_replay import _SpoolReading

# The spool and what it hands out (the types live in `spool_format`).
__all__ = ["RecordKind", "Recovered", "Spool", "SpoolEntry", "SpoolFull", "SpoolStats"]

log = logging.getLogger(__name__)


class SpoolFull(Exception):
    """The spool is at `max_bytes` (or the disk refused the write); the sender should retry."""


class Spool(_SpoolReading):
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
