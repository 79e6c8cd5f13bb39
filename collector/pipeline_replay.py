"""The replay at start: what the previous process left in the spool, read back through the
stages before any new request, its runs rebuilt from their first span and their idle time
counted from when their requests arrived."""

from __future__ import annotations

import logging
import time

from mast_otel.collector.otlp.decode import (
    OtlpDecodeError,
    decode_logs,
    decode_spans,
    parse_logs_request,
    parse_trace_request,
)
from mast_otel.collector.otlp.jsonpb import parse_logs_json, parse_trace_json
from mast_otel.collector.pipeline_state import _Batch
from mast_otel.collector.pipeline_writes import _Writes
from mast_otel.collector.spool import RecordKind, Recovered, SpoolEntry

log = logging.getLogger(__name__)

_ENCODINGS: dict[RecordKind, str] = {
    RecordKind.TRACES_PROTOBUF: "protobuf",
    RecordKind.LOGS_PROTOBUF: "protobuf",
    RecordKind.TRACES_JSON: "json",
    RecordKind.LOGS_JSON: "json",
}


class _Replay(_Writes):
    """The replay (see the module)."""

    def _replay(self) -> None:
        """Re-read what the previous process left in the spool, before any new request."""
        assert self.spool is not None
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
                batch = _Batch("spans", [])
            batch.entry = entry
            batch.replayed = True
            batch.stored = entry.seq in recovered.stored
            self.stats.replayed_requests += 1
            # The windows' clock follows the requests' arrival while they are replayed, so a
            # run is not closed as idle before its later requests are replayed.
            self._replay_now = self._arrival(entry)
            self._process(batch, self._replay_now)
            if not self._wait_for_room():
                log.error(
                    "stopping while the store refuses writes: the replay ends here and the "
                    "rest of the spool is replayed at the next start"
                )
                self._replay_cut_short = True
                break
            self._maybe_tick()
        self._replay_now = None
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
        written = self.spool.written_at(entry.segment) if self.spool is not None else None
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
            self._maybe_tick()
            time.sleep(interval)
        return True


def _decode(kind: RecordKind, payload: bytes, depth: int) -> _Batch:
    if kind in (RecordKind.TRACES_PROTOBUF, RecordKind.TRACES_JSON):
        request = (
            parse_trace_request(payload)
            if kind is RecordKind.TRACES_PROTOBUF
            else parse_trace_json(payload)
        )
        return _Batch("spans", decode_spans(request, max_value_depth=depth).records)
    logs_request = (
        parse_logs_request(payload)
        if kind is RecordKind.LOGS_PROTOBUF
        else parse_logs_json(payload)
    )
    return _Batch("logs", decode_logs(logs_request, max_value_depth=depth).records)
