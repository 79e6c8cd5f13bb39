"""The spool's ledger, kept by the pipeline: which segments each record and each open run
holds, and what a finished write lets go (journaled first, so a replay knows). The stages tell
it what each batch touched and which runs closed; the writes tell it what the store took."""

from __future__ import annotations

from mast_otel.collector.spool import Spool, SpoolEntry


class SegmentLedger:
    """What each spool segment still waits for, from the pipeline's side: records whose rows
    are handed to the exporter but not yet confirmed stored, and runs holding the segments
    their records are in. Touched by the worker thread only."""

    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        self.run_segments: dict[str, set[int]] = {}
        self._records: list[SpoolEntry] = []
        self._closes: list[tuple[str, set[int]]] = []

    def touched(self, trace_id: str, segment: int) -> None:
        held = self.run_segments.setdefault(trace_id, set())
        if segment not in held:
            held.add(segment)
            self.spool.hold(segment)

    def processed(self, entry: SpoolEntry) -> None:
        self._records.append(entry)

    def closed(self, trace_id: str) -> None:
        held = self.run_segments.pop(trace_id, None)
        if held:
            self._closes.append((trace_id, held))

    def mark(self) -> tuple[int, int]:
        """Where the ledger stands: what a write starting now covers, for `confirm`."""
        return len(self._records), len(self._closes)

    def confirm(self, upto: tuple[int, int] | None = None) -> None:
        """What was handed to the exporter (up to a `mark`, or all) is in the store: journal
        it, then let go."""
        records_n, closes_n = upto if upto is not None else self.mark()
        records, closes = self._records[:records_n], self._closes[:closes_n]
        if not records and not closes:
            self.spool.idle_rotate()
            return
        lines: dict[int, list[str]] = {}
        for entry in records:
            lines.setdefault(entry.segment, []).append(f"S {entry.seq}")
        for trace_id, segments in closes:
            for segment in segments:
                lines.setdefault(segment, []).append(f"C {trace_id}")
        self.spool.journal(lines)
        for entry in records:
            self.spool.release(entry.segment)
        for _, segments in closes:
            for segment in segments:
                self.spool.release(segment)
        del self._records[:records_n]
        del self._closes[:closes_n]
        self.spool.idle_rotate()

    def runs_holding(self, segment: int) -> list[str]:
        return [trace for trace, held in self.run_segments.items() if segment in held]
