"""Redaction: secrets out of attribute values before anything stores them or reads them.

Agents' tool calls carry what the agent typed and what the tool printed: bearer tokens,
cloud keys, passwords in connection strings, `--token=` flags. Rules are regular expressions
on attribute keys (the whole value goes) and on string values (the match goes, or only its
`secret` group, so "Authorization: Bearer [REDACTED]" still says what it was). Attributes
matching a truncation rule are cut to a configured length. Everything is counted.

All value rules run as one combined expression, so a value is scanned once whatever the
number of rules. Pure logic on records: the pipeline calls `Redactor.span`/`log` on each.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from processors.limits import truncate_text
from processors.records import Attributes, AttrValue, LogRecord, SpanRecord

DEFAULT_REDACTED_KEY_PATTERNS: tuple[str, ...] = (
    r"(^|[._-])(password|passwd|pwd|secret|client[_-]?secret|api[_-]?key|access[_-]?key"
    r"|secret[_-]?key|private[_-]?key|token|auth[_-]?token|access[_-]?token|refresh[_-]?token"
    r"|session[_-]?token|authorization|proxy[_-]?authorization|cookie|set[_-]?cookie"
    r"|credentials?)$",
)

# Every default rule runs in time linear in the value's length (repetitions that could
# backtrack are bounded), so a hostile value cannot make redaction quadratic.
DEFAULT_REDACTED_VALUE_PATTERNS: tuple[str, ...] = (
    # HTTP authorization schemes.
    r"(?i:\bbearer\s+)(?P<secret>[A-Za-z0-9\-._~+/]{8,}=*)",
    r"(?i:\bbasic\s+)(?P<secret>[A-Za-z0-9+/]{8,}={0,2})",
    # AWS access key ids and secret keys.
    r"\b(?P<secret>(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16})\b",
    r"(?i:aws_secret_access_key|aws_session_token)[\"']?\s*[:=]\s*[\"']?"
    r"(?P<secret>[A-Za-z0-9/+=]{16,})",
    # Passwords in URLs: scheme://user:password@host
    r"\b[A-Za-z][A-Za-z0-9+.\-]{0,31}://[^\s:/?#@]{1,256}:(?P<secret>[^\s@/?#]{1,256})@",
    # Command-line flags: --token=..., --password ..., -p=...
    r"(?i:--?(?:token|password|passwd|secret|api[-_]?key|access[-_]?key|client[-_]secret"
    r"|auth[-_]?token))(?:=|\s+)(?P<secret>[^\s\"']+)",
    # key=value and "key": "value" forms.
    r"(?i:\b(?:password|passwd|pwd|secret|api[-_]?key|token|access[-_]?token"
    r"|client[-_]?secret)\b)[\"']?\s*[:=]\s*[\"']?(?P<secret>[^\s\"',;&}]+)",
    # Well-known token shapes.
    r"\b(?P<secret>gh[pousr]_[A-Za-z0-9]{30,})\b",
    r"\b(?P<secret>sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,})",
    r"\b(?P<secret>xox[abprs]-[A-Za-z0-9-]{10,})",
    r"\b(?P<secret>eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
    # A key block, to its END line or 16 KiB (the END is optional so that every match
    # consumes what it scanned: no rescanning, however many BEGIN lines a value holds).
    r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----(?:(?!-----END)[\s\S]){0,16384}"
    r"(?:-----END [A-Z ]{0,40}PRIVATE KEY-----)?",
)

# Literal keywords (case-insensitive regex alternatives) at least one of which appears in any
# match of each default rule. A value without any of them is not scanned by these rules.
_HINTS: dict[str, tuple[str, ...]] = dict(
    zip(
        DEFAULT_REDACTED_VALUE_PATTERNS,
        (
            ("bearer",),
            ("basic",),
            ("akia", "asia", "agpa", "aida", "aroa", "anpa"),
            ("aws_secret", "aws_session"),
            ("://",),
            ("-token", "-passw", "-secret", "-api", "-access", "-client", "-auth"),
            ("passw", "pwd", "secret", "api", "token"),
            ("gh[pousr]_",),
            ("sk-",),
            ("xox",),
            ("eyj",),
            ("private key",),
        ),
        strict=True,
    )
)

# The shortest value a default rule can match; shorter strings are not scanned.
_MIN_SCANNED = 8
_GLOBAL_FLAGS = re.compile(r"^\(\?([aiLmsux]+)\)")
_KEY_CACHE_MAX = 10_000


@dataclass
class RedactionConfig:
    """Secrets out of attribute values before storage and detection; counted."""

    # Apply the rules at all.
    enabled: bool = True
    # Attributes whose key matches (case-insensitive search) have their whole value replaced.
    key_patterns: list[str] = field(default_factory=lambda: list(DEFAULT_REDACTED_KEY_PATTERNS))
    # Matches in string values are replaced; a group named `secret` limits the replacement
    # to that part, keeping the context ("Bearer [REDACTED]").
    value_patterns: list[str] = field(default_factory=lambda: list(DEFAULT_REDACTED_VALUE_PATTERNS))
    # What a redacted value (or its secret part) becomes.
    replacement: str = "[REDACTED]"
    # Attributes whose key matches (case-insensitive search) are cut to `truncate_bytes`.
    truncate_key_patterns: list[str] = field(default_factory=list)
    # Length those attributes are cut to, marker included.
    truncate_bytes: int = 4096

    def validate(self) -> None:
        if self.truncate_bytes < 64:
            raise ValueError("redaction.truncate_bytes must be at least 64")
        compile_rules(self)


@dataclass(frozen=True)
class CompiledRules:
    keys: re.Pattern[str] | None
    truncate_keys: re.Pattern[str] | None
    # Value rules whose keywords the trigger looks for (the defaults), and the others.
    hinted: tuple[re.Pattern[str], ...]
    unhinted: tuple[re.Pattern[str], ...]
    # Finds any keyword of a hinted rule: one fast scan decides whether a value needs more.
    trigger: re.Pattern[str] | None
    # Per hinted rule, its own keywords: a value is run through a rule only if they appear in
    # it (a span with a URL somewhere must not send every long value through every rule).
    hints: tuple[re.Pattern[str], ...] = ()


def _scoped(pattern: str) -> str:
    """A pattern that may start with global flags ("(?i)...") as a scoped group, so it can
    sit inside an alternation."""
    match = _GLOBAL_FLAGS.match(pattern)
    if match:
        return f"(?{match[1]}:{pattern[match.end() :]})"
    return pattern


def _check(key: str, patterns: list[str]) -> None:
    for i, pattern in enumerate(patterns):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(
                f"{key}[{i}]: {pattern!r} is not a valid regular expression: {exc}"
            ) from exc


def _compile(key: str, patterns: list[str], flags: int = 0) -> re.Pattern[str] | None:
    _check(key, patterns)
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{_scoped(p)})" for p in patterns), flags)


def compile_rules(config: RedactionConfig) -> CompiledRules:
    """Check and compile the rules; raises ValueError naming the bad one."""
    keys = _compile("redaction.key_patterns", config.key_patterns, re.IGNORECASE)
    truncate = _compile(
        "redaction.truncate_key_patterns", config.truncate_key_patterns, re.IGNORECASE
    )
    _check("redaction.value_patterns", config.value_patterns)
    hinted: list[re.Pattern[str]] = []
    unhinted: list[re.Pattern[str]] = []
    keywords: list[str] = []
    per_rule: list[re.Pattern[str]] = []
    for pattern in config.value_patterns:
        hints = _HINTS.get(pattern)
        if hints is None:
            unhinted.append(re.compile(pattern))
        else:
            hinted.append(re.compile(pattern))
            keywords.extend(hints)
            per_rule.append(re.compile("|".join(hints)))
    # Matched against lowercased text: much faster than an IGNORECASE alternation.
    trigger = re.compile("|".join(dict.fromkeys(keywords))) if keywords else None
    return CompiledRules(keys, truncate, tuple(hinted), tuple(unhinted), trigger, tuple(per_rule))


class Redactor:
    """Applies the redaction rules to records in place and counts what it changed.

    Counters (in `stats`): values_redacted (matches replaced in values), keys_redacted
    (whole values replaced for their key), values_truncated (cut by a truncation rule).
    """

    def __init__(self, config: RedactionConfig) -> None:
        self.config = config
        self.rules = compile_rules(config)
        self.stats: Counter[str] = Counter()
        self._key_verdicts: dict[str, tuple[bool, bool]] = {}
        self._scan = False

    @property
    def active(self) -> bool:
        rules = self.rules
        return self.config.enabled and bool(
            rules.keys or rules.truncate_keys or rules.hinted or rules.unhinted
        )

    def span(self, record: SpanRecord) -> None:
        if not self.active:
            return
        maps = [record.attributes, record.resource_attributes]
        maps.extend(event.attributes for event in record.events)
        maps.extend(link.attributes for link in record.links)
        self._scan = self._needs_scan(maps, record.status_message)
        for attributes in maps:
            self._attributes(attributes)
        record.status_message = self._text(record.status_message)

    def log(self, record: LogRecord) -> None:
        if not self.active:
            return
        maps = [record.attributes, record.resource_attributes]
        self._scan = self._needs_scan(maps, record.body)
        for attributes in maps:
            self._attributes(attributes)
        record.body = self._value(record.body)

    def _needs_scan(self, maps: list[Attributes], extra: AttrValue) -> bool:
        """Whether any string in the record holds a keyword of the default rules: one scan of
        the record's text instead of one per value, since nearly every record has none."""
        trigger = self.rules.trigger
        if trigger is None:
            return False
        texts: list[str] = []
        for attributes in maps:
            for value in attributes.values():
                _collect_text(value, texts)
        _collect_text(extra, texts)
        return bool(texts) and trigger.search("\n".join(texts).lower()) is not None

    def _verdict(self, key: str) -> tuple[bool, bool]:
        verdict = self._key_verdicts.get(key)
        if verdict is None:
            rules = self.rules
            verdict = (
                bool(rules.keys is not None and rules.keys.search(key)),
                bool(rules.truncate_keys is not None and rules.truncate_keys.search(key)),
            )
            if len(self._key_verdicts) >= _KEY_CACHE_MAX:
                self._key_verdicts.clear()
            self._key_verdicts[key] = verdict
        return verdict

    def _attributes(self, attributes: Attributes) -> None:
        for key, value in attributes.items():
            secret, truncate = self._verdict(key)
            if secret:
                if value not in (None, ""):
                    attributes[key] = self.config.replacement
                    self.stats["keys_redacted"] += 1
                continue
            if isinstance(value, str | list | dict):
                value = self._value(value)
                if truncate and isinstance(value, str):
                    value, cut = truncate_text(value, self.config.truncate_bytes)
                    if cut:
                        self.stats["values_truncated"] += 1
                attributes[key] = value

    def _value(self, value: AttrValue) -> AttrValue:
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, list):
            return [self._value(item) for item in value]
        if isinstance(value, dict):
            out: dict[str, AttrValue] = {}
            for key, item in value.items():
                if self._verdict(key)[0] and item not in (None, ""):
                    self.stats["keys_redacted"] += 1
                    out[key] = self.config.replacement
                else:
                    out[key] = self._value(item)
            return out
        return value

    def _text(self, text: str) -> str:
        rules = self.rules
        if len(text) < _MIN_SCANNED:
            return text
        if self._scan:
            lowered = text.lower()
            for pattern, hint in zip(rules.hinted, rules.hints, strict=True):
                if hint.search(lowered):
                    text = pattern.sub(self._replace, text)
        for pattern in rules.unhinted:
            text = pattern.sub(self._replace, text)
        return text

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


def _collect_text(value: AttrValue, out: list[str]) -> None:
    if isinstance(value, str):
        if len(value) >= _MIN_SCANNED:
            out.append(value)
    elif isinstance(value, list):
        for item in value:
            _collect_text(item, out)
    elif isinstance(value, dict):
        for item in value.values():
            _collect_text(item, out)
