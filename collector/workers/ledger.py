"""The receiving process's side of the spool's ledger when workers analyse the runs.

A spooled request is split into parts, one per worker it has records for. It is journaled
stored (`S seq`) and lets go of its segment once every worker it went to has reported its part
stored; a run a worker closed (`C trace`) lets go of the segments it held. So the spool on disk
means what it means with one process, and a restart replays it the same way.

Worker generations: a dead worker's holds become stale when it is restarted and are let go once
its successor says its replay is queued and processed ("replayed"); reports from an older
generation are ignored (counted).

Relief: past `durability.run_eviction_ratio` of the spool, the workers whose runs alone hold the
oldest spool segment are asked to close them (once per segment and worker generation), as one
process closes them itself.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mast_otel.collector.config import DurabilityConfig
from mast_otel.collector.spool import Spool, SpoolEntry


@dataclass
class _Part:
    """A spooled request not yet stored by every worker it went to."""

    segment: int
    left: int
    stored: set[int] = field(default_factory=set)


@dataclass
class LedgerStats:
    # Reports of a worker's earlier generation (before a restart): ignored.
    stale_reports: int = 0
    # Times workers were asked to close the runs holding the oldest spool segment.
    spool_reliefs: int = 0


class SpoolLedger:
    """What each spooled request and segment waits for, from the workers' reports."""

    def __init__(
        self,
        spool: Spool,
        workers: int,
        durability: DurabilityConfig,
        ask: Callable[[int, bytes], None],
    ) -> None:
        self.spool = spool
        self.durability = durability
        self.stats = LedgerStats()
        # Sends a control item to a worker (never called under `lock`).
        self._ask = ask
        self.lock = threading.Lock()
        self._parts: dict[int, _Part] = {}
        self._held: list[Counter[int]] = [Counter() for _ in range(workers)]
        self._stale: dict[int, Counter[int]] = {}
        self._generation = [0] * workers
        # Sequence numbers handed to workers (replayed at a restart only if handed over).
        self._given: set[int] = set()
        # (segment, shard, generation) asked to close the runs holding a segment.
        self._relieving: set[tuple[int, int, int]] = set()

    # -- what the receiving process did ---------------------------------------------------------

    def handed_over(self, entry: SpoolEntry, parts: int) -> None:
        """A request's parts are with their workers (called under the pool's lock)."""
        with self.lock:
            self._given.add(entry.seq)
            self._parts[entry.seq] = _Part(entry.segment, parts)

    def finish_record(self, seq: int, segment: int) -> None:
        """A request with no record for any worker: stored as it is."""
        self.spool.journal({segment: [f"S {seq}"]})
        self.spool.release(segment)

    def restarted(self, shard: int) -> tuple[set[int], dict[int, bool]]:
        """A worker is started again (under the pool's lock): its holds become stale. Returns
        the requests handed over so far and, for those not yet stored by every worker,
        whether this shard's part is stored."""
        with self.lock:
            self._generation[shard] += 1
            stale = self._held[shard]
            self._held[shard] = Counter()
            previous = self._stale.get(shard)
            if previous:
                stale.update(previous)
            self._stale[shard] = stale
            parts_stored = {seq: shard in part.stored for seq, part in self._parts.items()}
            return set(self._given), parts_stored

    # -- what workers report --------------------------------------------------------------------

    def report(self, shard: int, generation: int, message: Any) -> None:
        kind = message[0]
        with self.lock:
            if generation != self._generation[shard]:
                self.stats.stale_reports += 1
                return
        if kind == "replayed":
            with self.lock:
                stale = self._stale.pop(shard, None)
            for segment, count in (stale or Counter()).items():
                if count > 0:
                    self.spool.release(segment, count)
        elif kind == "ledger":
            self._ledger(shard, *message[1:])

    def _ledger(self, shard: int, holds: list[int], stored: list[int], closes: list[Any]) -> None:
        spool = self.spool
        lines: dict[int, list[str]] = {}
        releases: list[int] = []
        with self.lock:
            held = self._held[shard]
            for segment in holds:
                held[segment] += 1
                spool.hold(segment)
            for trace_id, segments in closes:
                for segment in segments:
                    lines.setdefault(segment, []).append(f"C {trace_id}")
                    releases.append(segment)
                    held[segment] -= 1
            for seq in stored:
                part = self._parts.get(seq)
                if part is None or shard in part.stored:
                    continue
                part.stored.add(shard)
                part.left -= 1
                if part.left <= 0:
                    del self._parts[seq]
                    lines.setdefault(part.segment, []).append(f"S {seq}")
                    releases.append(part.segment)
            if len(self._given) > 4 * len(self._parts) + 10_000:
                # Records in segments no longer on disk are never replayed again.
                floor = spool.oldest_segment()
                if floor is not None:
                    self._given = {seq for seq in self._given if seq >= floor}
        if lines:
            spool.journal(lines)
        for segment in releases:
            spool.release(segment)
        spool.idle_rotate()
        self.relieve()

    def relieve(self) -> None:
        """Past `durability.run_eviction_ratio` of the spool, ask the workers whose runs alone
        hold its oldest segment to close them; the segment goes when their closes are stored."""
        spool = self.spool
        if spool.bytes <= self.durability.max_spool_bytes * self.durability.run_eviction_ratio:
            return
        oldest = spool.oldest_held()
        if oldest is None:
            return
        with self.lock:
            holders = [shard for shard, held in enumerate(self._held) if held[oldest] > 0]
            runs = sum(self._held[shard][oldest] for shard in holders)
            if not holders or spool.refs(oldest) != runs:
                return  # records in it still wait for the store, or a dead worker's holds
            asked = {(oldest, shard, self._generation[shard]) for shard in holders}
            if asked <= self._relieving:
                return
            self._relieving = {key for key in self._relieving if key[0] >= oldest} | asked
            self.stats.spool_reliefs += 1
        for shard in holders:
            self._ask(shard, json.dumps({"relieve": oldest}).encode())
