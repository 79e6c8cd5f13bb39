"""Redaction: secrets out of attribute values before anything stores them or reads them.

Agents' tool calls carry what the agent typed and what the tool printed: bearer tokens,
cloud keys, passwords in connection strings, `--token=` flags. Rules are regular expressions
on attribute keys (the whole value goes) and on string values (the match goes, or only its
`secret` group, so "Authorization: Bearer [REDACTED]" still says what it was). Attributes
matching a truncation rule are cut to a configured length. Everything is counted.

The rules' RE2 screen (`redact_rules`) runs first over a whole protobuf request's bytes
(`needs_scan`: most requests stop there, with only their keys checked), then over a record's
text, then over each value. Pure logic on records: the pipeline calls `Redactor.span`/`log`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from mast_otel.processors.limits import truncate_text
from mast_otel.processors.model import Finding, RunSignature
from mast_otel.processors.records import Attributes, AttrValue, LogRecord, SpanRecord
from mast_otel.processors.redact_rules import RedactionConfig, compile_rules

# A key's words are also read apart where its case changes ("dbPassword" as "db_Password",
# "SecretAccessKey" as "Secret_Access_Key"), so camelCase keys meet the same rules.
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

# Command-line flags whose next argument is the secret, in an argument list
# (["--password", "hunter2"]): each item is read with its neighbour.
_SECRET_FLAG = re.compile(
    r"--?(?:token|password|passwd|pass|secret|api[-_]?key|access[-_]?key|client[-_]?secret"
    r"|auth[-_]?token|access[-_]?token|private[-_]?key|passphrase)",
    re.IGNORECASE,
)


def _utf8(text: str) -> bytes:
    # Lone surrogates (JSON may carry them) pass through: they are no letters anyway.
    return text.encode("utf-8", "surrogatepass")


# The shortest value a default rule can match; shorter strings are not scanned.
_MIN_SCANNED = 6
_KEY_CACHE_MAX = 10_000
# The verdict of a key no rule names: (secret, truncate).
_PLAIN = (False, False)


class Redactor:
    """Applies the redaction rules to records in place and counts what it changed.

    Every stored text of a record is covered: attribute values of the span, its resource, its
    events and links (maps and arrays inside values, JSON inside strings, bytes read as
    UTF-8), span and event names, the status message, the service name; for logs the body,
    severity text and event name. Argument lists are read item by item with each item's
    neighbour (["--password", "x"]).

    Counters (in `stats`): values_redacted (matches replaced in values), keys_redacted
    (whole values replaced for their key), values_truncated (cut by a truncation rule),
    json_redacted (JSON strings whose parsed keys or values were redacted), args_redacted
    (argument-list items redacted for the flag before them), requests_screened (protobuf
    requests in which no value rule can match anywhere, whose records had their keys checked
    but not their values scanned).
    """

    def __init__(self, config: RedactionConfig) -> None:
        self.config = config
        self.rules = compile_rules(config)
        self.stats: Counter[str] = Counter()
        self._key_verdicts: dict[str, tuple[bool, bool]] = {}
        # The hinted rules the record being redacted may match; values are scanned at all
        # only when some are, or when there are rules without hints.
        self._rules: list[tuple[re.Pattern[str], Any]] = []
        self._scan = False
        # Whether strings that look like JSON are read as JSON in this record.
        self._json = False

    @property
    def active(self) -> bool:
        rules = self.rules
        return self.config.enabled and bool(
            rules.keys or rules.truncate_keys or rules.hinted or rules.unhinted
        )

    def needs_scan(self, data: bytes, encoding: str) -> bool:
        """Whether the records of a request (its body as received, decompressed) must have
        their values scanned. In protobuf every string value is its UTF-8 bytes as they are,
        so when no rule's hint is anywhere in the body, no value can match: one pass over the
        body instead of one per value (most requests hold no secret). JSON (escapes) and
        rules without hints are always scanned."""
        rules = self.rules
        if not self.active or (not rules.hinted and not rules.unhinted and not rules.keys):
            return False
        if rules.unhinted or rules.json_always or encoding != "protobuf":
            return True
        if rules.any_hint is not None and rules.any_hint.search(data) is not None:
            return True
        self.stats["requests_screened"] += 1
        return False

    def span(self, record: SpanRecord, scan: bool = True) -> None:
        """Redact one span. `scan=False` (its request passed `needs_scan`) checks keys only."""
        if not self.active:
            return
        maps = [record.attributes, record.resource_attributes]
        maps.extend(event.attributes for event in record.events)
        maps.extend(link.attributes for link in record.links)
        rules = self.rules
        if not scan and not rules.unhinted and not rules.json_always:
            # Nearly every span: its request holds no hint, so keys (and arrays) only.
            self._rules, self._json, self._scan = [], False, False
            for attributes in maps:
                self._attributes(attributes)
            return
        names: list[AttrValue] = [
            record.name,
            record.status_message,
            record.service_name,
            record.scope_name,
            record.scope_version,
            record.trace_state,
        ]
        names.extend(event.name for event in record.events)
        names.extend(link.trace_state for link in record.links)
        self._prepare(scan, maps, names)
        for attributes in maps:
            self._attributes(attributes)
        if self._scan:
            record.name = self._text(record.name)
            record.status_message = self._text(record.status_message)
            record.service_name = self._text(record.service_name)
            record.scope_name = self._text(record.scope_name)
            record.scope_version = self._text(record.scope_version)
            record.trace_state = self._text(record.trace_state)
            for event in record.events:
                event.name = self._text(event.name)
            for link in record.links:
                link.trace_state = self._text(link.trace_state)

    def log(self, record: LogRecord, scan: bool = True) -> None:
        if not self.active:
            return
        maps = [record.attributes, record.resource_attributes]
        self._prepare(
            scan,
            maps,
            [
                record.body,
                record.severity_text,
                record.event_name,
                record.service_name,
                record.scope_name,
                record.scope_version,
            ],
        )
        for attributes in maps:
            self._attributes(attributes)
        record.body = self._value(record.body)
        if self._scan:
            record.severity_text = self._text(record.severity_text)
            record.event_name = self._text(record.event_name)
            record.service_name = self._text(record.service_name)
            record.scope_name = self._text(record.scope_name)
            record.scope_version = self._text(record.scope_version)

    def parts(
        self, maps: list[Attributes], values: list[AttrValue], scan: bool = True
    ) -> list[AttrValue]:
        """The parts of one record of any shape (a request's span, log record, resource or
        scope as the wire holds them): its attribute maps redacted in place, its other values
        (names, texts, a log's body) returned redacted, as `span` and `log` do."""
        if not self.active:
            return values
        self._prepare(scan, maps, values)
        for attributes in maps:
            self._attributes(attributes)
        return [self._value(value) for value in values]

    def key_verdict(self, key: str) -> tuple[bool, bool]:
        """Whether a key's value goes whole (a secret key) and whether it is cut (a
        truncation rule)."""
        return self._verdict(key)

    def text(self, value: str) -> str:
        """Any one text (a finding's message, a run's names), scanned by every rule it may
        match."""
        if not self.active:
            return value
        self._prepare(True, [], [value])
        return self._text(value) if self._scan else value

    def value(self, value: AttrValue) -> AttrValue:
        """Any value with maps inside (a finding's evidence): keys and values, as attributes."""
        if not self.active:
            return value
        self._prepare(True, [{"": value}], [])
        return self._value(value)

    def finding(self, finding: Finding) -> None:
        """A finding's message, evidence and names: detectors quote what steps carried, and
        a judge's findings come from elsewhere."""
        if not self.active:
            return
        finding.message = self.text(finding.message)
        evidence = self.value(dict(finding.evidence))
        finding.evidence = evidence if isinstance(evidence, dict) else {}
        finding.service = self.text(finding.service)
        finding.agent = self.text(finding.agent)
        finding.model = self.text(finding.model)

    def signature(self, signature: RunSignature) -> None:
        """A run signature's names."""
        if not self.active:
            return
        signature.service = self.text(signature.service)
        signature.agent = self.text(signature.agent)
        signature.model = self.text(signature.model)
        signature.conversation_id = self.text(signature.conversation_id)

    def _prepare(self, scan: bool, maps: list[Attributes], extra: list[AttrValue]) -> None:
        """Which hinted rules this record's text may match: one pass over all its text
        instead of one per value, since nearly every record matches none."""
        self._rules = []
        self._json = False
        rules = self.rules
        if scan and (rules.hinted or rules.json_key_hint is not None):
            texts: list[str] = []
            raw: list[bytes] = []
            for attributes in maps:
                for value in attributes.values():
                    _collect_text(value, texts, raw)
            for value in extra:
                _collect_text(value, texts, raw)
            if texts or raw:
                data = _utf8("\n".join(texts))
                if raw:
                    data += b"\n" + b"\n".join(raw)
                if rules.any_hint is not None and rules.any_hint.search(data) is not None:
                    self._rules = [rule for rule in rules.hinted if rule[1].search(data)]
                    self._json = (
                        rules.json_key_hint is not None
                        and rules.json_key_hint.search(data) is not None
                    )
        self._json = self._json or (scan and rules.json_always)
        self._scan = bool(self._rules or rules.unhinted or self._json)

    def _verdict(self, key: str) -> tuple[bool, bool]:
        verdict = self._key_verdicts.get(key)
        if verdict is None:
            rules = self.rules
            words = _CAMEL.sub("_", key)
            verdict = (
                bool(
                    rules.keys is not None and (rules.keys.search(key) or rules.keys.search(words))
                ),
                bool(
                    rules.truncate_keys is not None
                    and (rules.truncate_keys.search(key) or rules.truncate_keys.search(words))
                ),
            )
            if verdict == _PLAIN:
                verdict = _PLAIN  # one object, so the hot loop can test identity
            if len(self._key_verdicts) >= _KEY_CACHE_MAX:
                self._key_verdicts.clear()
            self._key_verdicts[key] = verdict
        return verdict

    def _attributes(self, attributes: Attributes) -> None:
        scan = self._scan
        verdicts = self._key_verdicts
        for key, value in attributes.items():
            verdict = verdicts.get(key) or self._verdict(key)
            if (
                verdict is _PLAIN
                and not scan
                and type(value) is not list
                and type(value) is not dict
            ):
                # Nearly every attribute: no rule for its key, no value scan, no maps inside.
                continue
            secret, truncate = verdict
            if secret:
                if value not in (None, "", b""):
                    attributes[key] = self.config.replacement
                    self.stats["keys_redacted"] += 1
                continue
            if isinstance(value, str):
                if scan:
                    value = self._text(value)
                if truncate:
                    value, cut = truncate_text(value, self.config.truncate_bytes)
                    if cut:
                        self.stats["values_truncated"] += 1
                attributes[key] = value
            elif isinstance(value, list | dict | bytes):
                # Maps inside values have keys of their own; bytes may be text.
                attributes[key] = self._value(value)

    def _value(self, value: AttrValue) -> AttrValue:
        if isinstance(value, str):
            return self._text(value) if self._scan else value
        if isinstance(value, list):
            return self._list(value)
        if isinstance(value, dict):
            out: dict[str, AttrValue] = {}
            for key, item in value.items():
                if self._verdict(key)[0] and item not in (None, "", b""):
                    self.stats["keys_redacted"] += 1
                    out[key] = self.config.replacement
                else:
                    out[key] = self._value(item)
            return out
        if isinstance(value, bytes):
            return self._bytes(value)
        return value

    def _list(self, items: list[AttrValue]) -> list[AttrValue]:
        """Items of an array; an item after a secret flag ("--password") is the secret."""
        out: list[AttrValue] = []
        secret_next = False
        for item in items:
            if secret_next and isinstance(item, str | bytes) and item not in ("", b""):
                self.stats["args_redacted"] += 1
                out.append(self.config.replacement)
                secret_next = False
                continue
            secret_next = (
                isinstance(item, str)
                and item[:1] == "-"
                and _SECRET_FLAG.fullmatch(item) is not None
            )
            out.append(self._value(item))
        return out

    def _bytes(self, value: bytes) -> bytes:
        """Bytes are stored as base64, which no rule reads: read them as UTF-8 text (bytes
        that are not UTF-8 pass through as they are) and keep them if nothing matched."""
        if not self._scan or len(value) < _MIN_SCANNED:
            return value
        text = value.decode("utf-8", "surrogateescape")
        redacted = self._text(text)
        if redacted is text or redacted == text:
            return value
        return redacted.encode("utf-8", "surrogateescape")

    def _text(self, text: str) -> str:
        if len(text) < _MIN_SCANNED:
            return text
        if self._json and _JSON_START.match(text) is not None:
            text = self._json_text(text)
        if self._rules:
            data = _utf8(text)
            for pattern, hint in self._rules:
                if hint.search(data) is not None:
                    text = pattern.sub(self._replace, text)
        for pattern in self.rules.unhinted:
            text = pattern.sub(self._replace, text)
        return text

    def _json_text(self, text: str) -> str:
        """JSON inside a string: its keys and values redacted as maps are (recursively, so
        JSON in a string inside it too), written back only if something changed."""
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            return text
        if not isinstance(parsed, dict | list):
            return text
        before = self.stats["keys_redacted"] + self.stats["values_redacted"]
        before += self.stats["args_redacted"]
        try:
            redacted = self._value(parsed)
        except RecursionError:
            return text
        after = self.stats["keys_redacted"] + self.stats["values_redacted"]
        after += self.stats["args_redacted"]
        if after == before:
            return text
        self.stats["json_redacted"] += 1
        return json.dumps(redacted, ensure_ascii=False)

    def _replace(self, match: re.Match[str]) -> str:
        self.stats["values_redacted"] += 1
        replacement = self.config.replacement
        if "secret" not in match.re.groupindex or match.start("secret") < 0:
            return replacement
        base = match.start()
        whole = match.group(0)
        return (
            whole[: match.start("secret") - base]
            + replacement
            + whole[match.end("secret") - base :]
        )


# What a string holding a JSON object or array starts with.
_JSON_START = re.compile(r"\s*[\[{]")


def _collect_text(value: AttrValue, out: list[str], raw: list[bytes]) -> None:
    if isinstance(value, str):
        if len(value) >= _MIN_SCANNED:
            out.append(value)
    elif isinstance(value, list):
        for item in value:
            _collect_text(item, out, raw)
    elif isinstance(value, dict):
        for item in value.values():
            _collect_text(item, out, raw)
    elif isinstance(value, bytes) and len(value) >= _MIN_SCANNED:
        raw.append(value)
