"""Limits on what one span or log record may carry, applied before anything reads or stores it.

A hostile or buggy sender can put megabytes in one attribute, thousands of attributes or
events on one span, or timestamps no store can hold. Each limit here is configured, counted
when hit, and keeps as much as it can: an over-long value is cut and ends with a marker saying
how much was cut ("…[truncated 1234 bytes]"), attributes, events and links past their count
are dropped and the span says how many (`mast.dropped.*`), timestamps beyond what the store's
DateTime64(9) can hold are clamped. Everything else is stored as sent.

Pure logic on records: the pipeline calls `RecordLimits.span`/`log` on each record.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from mast_otel.processors import conventions
from mast_otel.processors.records import Attributes, AttrValue, LogRecord, SpanRecord

# ClickHouse DateTime64(9) and Arrow's timestamp("ns") are signed 64-bit nanoseconds.
MAX_TIMESTAMP_NS = 2**63 - 1
TRUNCATION_MARKER = "…[truncated {n} bytes]"
# A cut moves back to the last whitespace within this many characters, if there is one.
_WORD_BACKOFF = 512
_LAST_WORD = re.compile(r"\s\S+\Z")


@dataclass
class LimitsConfig:
    """What one span or log record may carry; each limit is counted when hit."""

    # Longer string (and bytes) attribute values are cut, ending in "…[truncated N bytes]".
    max_attribute_value_bytes: int = 256 * 1024
    # Past these counts the rest is dropped; the span keeps mast.dropped.* counts.
    max_attributes_per_span: int = 128
    # Events past this are dropped (mast.dropped.events says how many).
    max_events_per_span: int = 128
    # Links past this are dropped (mast.dropped.links says how many).
    max_links_per_span: int = 128
    # A span starting or ending further than this from the collector's clock is stored as
    # sent and counted (clock_skew in /healthz).
    max_clock_skew_s: float = 24 * 3600.0

    def validate(self) -> None:
        for name in (
            "max_attribute_value_bytes",
            "max_attributes_per_span",
            "max_events_per_span",
            "max_links_per_span",
            "max_clock_skew_s",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"limits.{name} must be greater than 0")
        if self.max_attribute_value_bytes < 64:
            raise ValueError("limits.max_attribute_value_bytes must be at least 64")


def truncate_text(value: str, limit: int) -> tuple[str, int]:
    """`value` cut to at most `limit` UTF-8 bytes including the marker; returns the text and
    how many bytes were cut (0 when it fit). Never splits a character."""
    if len(value) * 4 <= limit:  # fits whatever the characters are: the common, cheap case
        return value, 0
    encoded = value.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit:
        return value, 0
    # The marker's own length depends on the number it shows; reserve for the widest.
    marker_room = len(TRUNCATION_MARKER.format(n=len(encoded)).encode("utf-8"))
    keep = max(0, limit - marker_room)
    kept = encoded[:keep].decode("utf-8", "ignore")
    # Not inside a word when a space is near: a token, key or password the limit falls in goes
    # whole instead of leaving its start, too short for any redaction rule to recognise, in
    # the store (redaction runs on what the limits keep).
    word = _LAST_WORD.search(kept, max(0, len(kept) - _WORD_BACKOFF))
    if word is not None:
        kept = kept[: word.start() + 1]
    cut = len(encoded) - len(kept.encode("utf-8", "surrogatepass"))
    return kept + TRUNCATION_MARKER.format(n=cut), cut


class RecordLimits:
    """Applies `LimitsConfig` to records in place and counts what it changed.

    Counters (in `stats`): values_truncated, attributes_dropped, events_dropped,
    links_dropped, timestamps_clamped.
    """

    def __init__(self, config: LimitsConfig) -> None:
        self.config = config
        self.stats: Counter[str] = Counter()

    def span(self, record: SpanRecord) -> None:
        config = self.config
        limit = config.max_attribute_value_bytes
        dropped_attributes = _cap_attributes(record.attributes, config.max_attributes_per_span)
        if len(record.events) > config.max_events_per_span:
            dropped_events = len(record.events) - config.max_events_per_span
            del record.events[config.max_events_per_span :]
            self.stats["events_dropped"] += dropped_events
            record.attributes[conventions.DROPPED_EVENTS] = dropped_events
        if len(record.links) > config.max_links_per_span:
            dropped_links = len(record.links) - config.max_links_per_span
            del record.links[config.max_links_per_span :]
            self.stats["links_dropped"] += dropped_links
            record.attributes[conventions.DROPPED_LINKS] = dropped_links
        if dropped_attributes:
            self.stats["attributes_dropped"] += dropped_attributes
            record.attributes[conventions.DROPPED_ATTRIBUTES] = dropped_attributes
        self._values(record.attributes)
        self._values(record.resource_attributes)
        for event in record.events:
            dropped_attributes = _cap_attributes(event.attributes, config.max_attributes_per_span)
            self.stats["attributes_dropped"] += dropped_attributes
            self._values(event.attributes)
            time_ns = event.time_ns
            if not 0 <= time_ns <= MAX_TIMESTAMP_NS:
                event.time_ns = self._timestamp(time_ns)
        for link in record.links:
            self.stats["attributes_dropped"] += _cap_attributes(
                link.attributes, config.max_attributes_per_span
            )
            self._values(link.attributes)
        # Names and messages short enough to fit whatever their characters skip the cut.
        name = record.name
        if type(name) is not str or len(name) * 4 > limit:
            record.name, _ = self._text(name)
        message = record.status_message
        if type(message) is not str or len(message) * 4 > limit:
            record.status_message, _ = self._text(message)
        start_ns = record.start_ns
        if not 0 <= start_ns <= MAX_TIMESTAMP_NS:
            record.start_ns = self._timestamp(start_ns)
        end_ns = record.end_ns
        if not 0 <= end_ns <= MAX_TIMESTAMP_NS:
            record.end_ns = self._timestamp(end_ns)

    def log(self, record: LogRecord) -> None:
        dropped = _cap_attributes(record.attributes, self.config.max_attributes_per_span)
        if dropped:
            self.stats["attributes_dropped"] += dropped
            record.attributes[conventions.DROPPED_ATTRIBUTES] = dropped
        self._values(record.attributes)
        self._values(record.resource_attributes)
        record.body = self._value(record.body)
        record.time_ns = self._timestamp(record.time_ns)
        record.observed_time_ns = self._timestamp(record.observed_time_ns)

    def _timestamp(self, value: int) -> int:
        if 0 <= value <= MAX_TIMESTAMP_NS:
            return value
        self.stats["timestamps_clamped"] += 1
        return min(max(value, 0), MAX_TIMESTAMP_NS)

    def _text(self, value: str) -> tuple[str, int]:
        text, cut = truncate_text(value, self.config.max_attribute_value_bytes)
        if cut:
            self.stats["values_truncated"] += 1
        return text, cut

    def _values(self, attributes: Attributes) -> None:
        limit = self.config.max_attribute_value_bytes
        for key, value in attributes.items():
            if type(value) is str:
                # Most values are short text that fits whatever its characters: no encoding.
                if len(value) * 4 > limit:
                    attributes[key] = self._text(value)[0]
            elif isinstance(value, str | bytes | list | dict):
                attributes[key] = self._value(value)

    def _value(self, value: AttrValue) -> AttrValue:
        """Cut every string or bytes value inside `value` to the limit (stored as-is otherwise).
        Nesting is already bounded by the decoder's max_value_depth."""
        if isinstance(value, str):
            return self._text(value)[0]
        if isinstance(value, bytes):
            limit = self.config.max_attribute_value_bytes
            if len(value) <= limit:
                return value
            self.stats["values_truncated"] += 1
            return value[:limit]
        if isinstance(value, list):
            return [self._value(item) for item in value]
        if isinstance(value, dict):
            return {key: self._value(item) for key, item in value.items()}
        return value


def _cap_attributes(attributes: Attributes, limit: int) -> int:
    """Keep the first `limit` attributes (in the order they were sent); returns how many went."""
    extra = len(attributes) - limit
    if extra <= 0:
        return 0
    for key in list(attributes)[limit:]:
        del attributes[key]
    return extra
