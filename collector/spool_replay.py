"""Reading back what the spool holds on disk: at start, what a previous process left
(`open`, then `replay`, every record holding its segment like a new one); while appending,
every segment now on disk (`read_live`, `journaled`: a sharded collector's worker restart)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from mast_otel.collector.spool_format import (
    _JOURNAL,
    _SUFFIX,
    RecordKind,
    Recovered,
    SpoolEntry,
    SpoolStats,
    _read_journal,
    _read_records,
    _Segment,
)

log = logging.getLogger(__name__)


class _SpoolReading:
    """The reading side of `Spool` (see the module); the state is the spool's own."""

    directory: Path
    fsync: bool
    stats: SpoolStats
    _lock: threading.Lock
    _segments: dict[int, _Segment]
    _replay: list[_Segment]
    _bytes: int
    _next_seq: int
    _syncer: threading.Thread | None

    if TYPE_CHECKING:

        def release(self, segment_id: int, count: int = 1) -> None: ...

        def _sync_loop(self) -> None: ...

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
