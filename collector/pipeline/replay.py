"""The replay at start: what the previous process left in the spool, read back through the
stages before any new request, its runs rebuilt from their first span and their idle time
counted from when their requests arrived."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from mast_otel.collector.config import Config
from mast_otel.collector.otlp.decode import (
    OtlpDecodeError,
    decode_logs,
    decode_spans,
    parse_logs_request,
    parse_trace_request,
)
from mast_otel.collector.otlp.jsonpb import parse_logs_json, parse_trace_json
from mast_otel.collector.pipeline.batch import Batch, Clock
from mast_otel.collector.pipeline.stats import PipelineStats
from mast_otel.collector.pipeline.writes import Writes
from mast_otel.collector.spool import RecordKind, Recovered, Spool, SpoolEntry
from mast_otel.collector.store.exporter import Exporter
from mast_otel.processors.redact import Redactor
from mast_otel.processors.window import RunWindows

log = logging.getLogger(__name__)

_ENCODINGS: dict[RecordKind, str] = {
    RecordKind.TRACES_PROTOBUF: "protobuf",
    RecordKind.LOGS_PROTOBUF: "protobuf",
    RecordKind.TRACES_JSON: "json",
    RecordKind.LOGS_JSON: "json",
}


class Replay:
    """The replay (see the module). Given the spool and what its reading found
    (`recovered`), the windows, the redactor, the counters, the exporter (the replay waits
    while the store is behind), the clock, the event a stop sets, `process` (the stages, over
    one batch) and the writes (the tick goes on while replaying, the windows' clock following
    the requests' arrival). After a stop, `cut_short` tells whether it ended before the end
    of the spool."""

    def __init__(
        self,
        config: Config,
        *,
        spool: Spool,
        recovered: Recovered | None,
        windows: RunWindows,
        redactor: Redactor,
        stats: PipelineStats,
        exporter: Exporter,
        clock: Clock,
        stopping: threading.Event,
        process: Callable[[Batch, float | None], None],
        writes: Writes,
    ) -> None:
        self.config = config
        self.spool = spool
        self.windows = windows
        self.redactor = redactor
        self.stats = stats
        self.exporter = exporter
        self.clock = clock
        self._recovered = recovered
        self._stop = stopping
        self._process = process
        self._writes = writes
        self.cut_short = False

    @property
    def pending(self) -> bool:
        """Whether the spool holds requests the previous process left, to replay first."""
        return self.spool.replaying

    def run(self) -> None:
        """Re-read what the previous process left in the spool, before any new request."""
        recovered = self._recovered or Recovered()
        for trace_id in recovered.closed:
            self.windows.mark_closed(trace_id)
        started = time.monotonic()
        log.info(
            "replaying %d spool segment(s), %d bytes, left by the previous run",
            recovered.segments,
            recovered.bytes,
        )
        depth = self.config.receivers.max_value_depth
        process, writes = self._process, self._writes
        told = False
        for entry, kind, payload in self.spool.replay():
            if self._stop.is_set() and not told:
                # Everything in the spool was acknowledged: a stop finishes the replay.
                told = True
                log.info(
                    "stopping: the replay goes on to the end of the spool (%d segment(s) "
                    "left) so that everything accepted is stored",
                    self.spool.replay_segments_left + 1,
                )
            try:
                batch = _decode(kind, payload, depth)
                batch.scan = self.redactor.needs_scan(payload, _ENCODINGS[kind])
            except OtlpDecodeError as exc:
                # Written only after decoding once, so this means the limits changed (depth)
                # or the disk corrupted it past the checksum: nothing to rebuild.
                self.stats.replay_decode_errors += 1
                log.error("cannot decode spooled request %d: %s", entry.seq, exc)
                batch = Batch("spans", [])
            batch.entry = entry
            batch.replayed = True
            batch.stored = entry.seq in recovered.stored
            self.stats.replayed_requests += 1
            # The windows' clock follows the requests' arrival while they are replayed, so a
            # run is not closed as idle before its later requests are replayed.
            now = self._arrival(entry)
            writes.follow(now)
            process(batch, now)
            if not self._wait_for_room():
                log.error(
                    "stopping while the store refuses writes: the replay ends here and the "
                    "rest of the spool is replayed at the next start"
                )
                self.cut_short = True
                break
            writes.maybe_tick()
        writes.follow(None)
        log.info(
            "replay done: %d request(s) in %.1f s, %d run(s) rebuilt and open",
            self.stats.replayed_requests,
            time.monotonic() - started,
            self.windows.active_runs,
        )

    def _arrival(self, entry: SpoolEntry) -> float:
        """When a replayed request arrived, on the pipeline's clock, at the latest: its
        segment's last write. A rebuilt run's idle time counts from there, not from the
        restart, so runs whose end never came close once idle past `windows.idle_timeout_s`
        instead of holding their segments (and being replayed again) at every restart."""
        now = self.clock()
        written = self.spool.written_at(entry.segment)
        if written is None:
            return now
        return now - min(max(0.0, time.time() - written), self.config.windows.idle_timeout_s)

    def _wait_for_room(self) -> bool:
        """Wait while the store's buffer is full (the writes go on on the store's thread).
        False when stopping and the store refuses writes: the replay gives up for now."""
        interval = self.config.pipeline.tick_interval_s
        while self.exporter.full:
            if self._stop.is_set() and self.exporter.failing:
                return False
            self._writes.maybe_tick()
            time.sleep(interval)
        return True


def _decode(kind: RecordKind, payload: bytes, depth: int) -> Batch:
    if kind in (RecordKind.TRACES_PROTOBUF, RecordKind.TRACES_JSON):
        request = (
            parse_trace_request(payload)
            if kind is RecordKind.TRACES_PROTOBUF
            else parse_trace_json(payload)
        )
        return Batch("spans", decode_spans(request, max_value_depth=depth).records)
    logs_request = (
        parse_logs_request(payload)
        if kind is RecordKind.LOGS_PROTOBUF
        else parse_logs_json(payload)
    )
    return Batch("logs", decode_logs(logs_request, max_value_depth=depth).records)
