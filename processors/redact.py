"""Redaction: secrets out of attribute values before anything stores them or reads them.

Agents' tool calls carry what the agent typed and what the tool printed: bearer tokens,
cloud keys, passwords in connection strings, `--token=` flags. Rules are regular expressions
on attribute keys (the whole value goes) and on string values (the match goes, or only its
`secret` group, so "Authorization: Bearer [REDACTED]" still says what it was). Attributes
matching a truncation rule are cut to a configured length. Everything is counted.

Nearly no record holds a secret, so the value rules run only where they can match: each
default rule has a hint (what every match of it contains), and RE2 looks for all hints in one
linear pass, first over a whole protobuf request's bytes (`needs_scan`: most requests stop
there, with only their keys checked), then over a record's text, then over each value. Pure
logic on records: the pipeline calls `Redactor.span`/`log` on each.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import re2

from processors.limits import truncate_text
from processors.model import Finding, RunSignature
from processors.records import Attributes, AttrValue, LogRecord, SpanRecord

DEFAULT_REDACTED_KEY_PATTERNS: tuple[str, ...] = (
    r"(^|[._-])(password|passwd|pwd|passphrase|secret|client[_-]?secret|api[_-]?key"
    r"|access[_-]?key|secret[_-]?access[_-]?key|account[_-]?key|shared[_-]?access[_-]?key"
    r"|secret[_-]?key|private[_-]?key|token|auth[_-]?token|access[_-]?token|refresh[_-]?token"
    r"|session[_-]?token|api[_-]?token|id[_-]?token|authorization|proxy[_-]?authorization"
    r"|cookie|set[_-]?cookie|credentials?|connection[_-]?string|jwt)$",
)

# A key's words are also read apart where its case changes ("dbPassword" as "db_Password",
# "SecretAccessKey" as "Secret_Access_Key"), so camelCase keys meet the same rules.
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

# A key in JSON or a key=value text, as far as the value rules and the JSON reading go: a
# quote (maybe escaped, when the JSON sits in a JSON string) closes it.
_Q = r"""(?:\\*["'])?"""
# What a value stops at: whitespace, quotes, backslashes (an escaped quote), separators.
_VALUE = r"""[^\s"'\\,;&}]+"""

# Every default rule runs in time linear in the value's length (repetitions that could
# backtrack are bounded), so a hostile value cannot make redaction quadratic.
DEFAULT_REDACTED_VALUE_PATTERNS: tuple[str, ...] = (
    # HTTP authorization schemes.
    r"(?i:\bbearer\s+)(?P<secret>[A-Za-z0-9\-._~+/]{8,}=*)",
    r"(?i:\bbasic\s+)(?P<secret>[A-Za-z0-9+/]{8,}={0,2})",
    # AWS access key ids.
    r"\b(?P<secret>(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16})\b",
    # AWS secret keys and session tokens: environment, config files, AWS CLI JSON
    # ("SecretAccessKey": "...", "SessionToken": "...").
    r"(?i:(?:aws_?)?(?:secret_?access_?key|session_?token))"
    + _Q
    + r"\s*[:=]\s*"
    + _Q
    + r"(?P<secret>[A-Za-z0-9/+=]{16,})",
    # Passwords in URLs: scheme://user:password@host
    r"\b[A-Za-z][A-Za-z0-9+.\-]{0,31}://[^\s:/?#@]{1,256}:(?P<secret>[^\s@/?#]{1,256})@",
    # Command-line flags: --token=..., --password ..., -p=...
    r"(?i:--?(?:token|password|passwd|secret|api[-_]?key|access[-_]?key|client[-_]secret"
    r"|auth[-_]?token))(?:=|\s+)(?P<secret>[^\s\"']+)",
    # curl's user:password.
    r"(?<![\w-])(?:-u|--user)[ \t]+[^\s:\"']{1,256}:(?P<secret>[^\s\"']+)",
    # key=value and "key": "value" forms, camelCase keys included ("dbPassword=...").
    r"(?i:(?:password|passwd|pwd|passphrase|secret|api[-_]?key|token|access[-_]?token"
    r"|client[-_]?secret|credentials?)\b)"
    + _Q
    + r"\s*[:=]\s*"
    + _Q
    + r"(?P<secret>"
    + _VALUE
    + r")",
    # Azure storage and service bus connection strings, SAS signatures.
    r"(?i:\b(?:AccountKey|SharedAccessKey|SharedAccessSignature)\s*=\s*)"
    r"(?P<secret>[^;\"'\s\\]{8,})",
    r"[?&](?i:sig)=(?P<secret>[A-Za-z0-9%+/=]{16,})",
    # Well-known token shapes.
    r"\b(?P<secret>gh[pousr]_[A-Za-z0-9]{30,})\b",
    r"\b(?P<secret>github_pat_[A-Za-z0-9_]{22,})",
    r"\b(?P<secret>glpat-[A-Za-z0-9_\-]{20,})",
    r"\b(?P<secret>sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,})",
    r"\b(?P<secret>(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,})",
    r"\b(?P<secret>whsec_[A-Za-z0-9]{24,})",
    r"\b(?P<secret>xox[abeoprs]-[A-Za-z0-9-]{10,})",
    r"\b(?P<secret>xapp-[0-9]-[A-Za-z0-9-]{10,})",
    r"(?i:hooks\.slack\.com/(?:services|workflows|triggers)/)(?P<secret>[A-Za-z0-9/_\-]{16,})",
    r"\b(?P<secret>AIza[0-9A-Za-z_\-]{35})",
    r"\b(?P<secret>ya29\.[0-9A-Za-z_\-]{20,})",
    r"\b(?P<secret>SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,})",
    r"\b(?P<secret>hf_[A-Za-z0-9]{30,})",
    r"\b(?P<secret>npm_[A-Za-z0-9]{36})",
    r"\b(?P<secret>eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
    # A key block (PEM, OpenSSH, PGP), to its END line or 16 KiB (the END is optional so that
    # every match consumes what it scanned: no rescanning, however many BEGIN lines a value
    # holds).
    r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:(?!-----END)[\s\S]){0,16384}"
    r"(?:-----END [A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----)?",
)

# What every match of each default rule contains, as a pattern over the UTF-8 bytes of the
# text, so that text without it is not run through the rule. Each is a necessary condition,
# looser than its rule, run by RE2 ignoring ASCII case (one linear pass for all of them, where
# Python's engine would try every rule at every position): `_WS` stands for the rule's
# whitespace (a Unicode space is 2-3 high bytes), and repetition bounds are dropped where the
# rule counts characters that may take several bytes.
_WS = r"[\t\n\x0b\x0c\r\x1c-\x1f \x80-\xff]"
_HQ = r"""(?:\\*["'])?"""
_HINTS: dict[str, str] = dict(
    zip(
        DEFAULT_REDACTED_VALUE_PATTERNS,
        (
            rf"bearer{_WS}+[a-z0-9\-._~+/]{{8}}",
            rf"basic{_WS}+[a-z0-9+/]{{8}}",
            r"(?:akia|asia|agpa|aida|aroa|anpa)[0-9a-z]{16}",
            rf"(?:secret_?access_?key|session_?token){_HQ}{_WS}*[:=]",
            r"://[^\s:/?#@]+:[^\s@/?#]+@",
            r"-(?:token|passw(?:or)?d|secret|api[-_]?key|access[-_]?key|client[-_]secret"
            rf"|auth[-_]?token)(?:=|{_WS})",
            r"-(?:u|-user)[ \t]+[^\s:]+:",
            rf"(?:passw(?:or)?d|pwd|passphrase|secret|key|token|credentials?){_HQ}{_WS}*[:=]",
            rf"(?:accountkey|sharedaccesskey|sharedaccesssignature){_WS}*=",
            r"[?&]sig=[a-z0-9%+/=]{16}",
            r"gh[pousr]_[a-z0-9]{30}",
            r"github_pat_[a-z0-9_]{22}",
            r"glpat-[a-z0-9_\-]{20}",
            r"sk-(?:ant-|proj-)?[a-z0-9_\-]{20}",
            r"[sr]k_(?:live|test)_[a-z0-9]{16}",
            r"whsec_[a-z0-9]{24}",
            r"xox[abeoprs]-[a-z0-9-]{10}",
            r"xapp-[0-9]-[a-z0-9-]{10}",
            r"hooks\.slack\.com/",
            r"aiza[0-9a-z_\-]{35}",
            r"ya29\.[0-9a-z_\-]{20}",
            r"sg\.[a-z0-9_\-]{16}",
            r"hf_[a-z0-9]{30}",
            r"npm_[a-z0-9]{36}",
            r"eyj[a-z0-9_-]{8}",
            r"private key(?: block)?-----",
        ),
        strict=True,
    )
)

# A secret-named key of JSON inside a string ("password": or, in a JSON string, \"password\":),
# for the default key rules: only text holding one is read as JSON (`_json_key_hint`).
JSON_KEY_HINT = (
    r"(?:passw(?:or)?d|pwd|passphrase|secret|key|token|cookie|credentials?|authorization"
    rf"|string|jwt)\\*[\"'](?:{_WS}|\\+[nrt])*:"
    # A secret flag as an item of a JSON array (["--password", "x"]).
    r"|-[a-z_-]*(?:token|pass|secret|key)[a-z]*\\*[\"']"
)

# Command-line flags whose next argument is the secret, in an argument list
# (["--password", "hunter2"]): each item is read with its neighbour.
_SECRET_FLAG = re.compile(
    r"--?(?:token|password|passwd|pass|secret|api[-_]?key|access[-_]?key|client[-_]?secret"
    r"|auth[-_]?token|access[-_]?token|private[-_]?key|passphrase)",
    re.IGNORECASE,
)

# Letters that match an ASCII letter of a rule under Python's IGNORECASE without being ASCII
# (Kelvin sign, long s, dotted and dotless i): a hint's letter also matches their UTF-8 bytes.
_UNICODE_FOLDS = {
    "i": ("\u0130", "\u0131"),
    "k": ("\u212a",),
    "s": ("\u017f",),
}


def _with_folds(pattern: str) -> str:
    """`pattern` with each literal i, k and s (outside classes and escapes) also matching the
    UTF-8 bytes of the letters IGNORECASE takes for them."""
    out: list[str] = []
    in_class = escaped = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        elif not in_class and char in _UNICODE_FOLDS:
            options = [char] + [
                "".join(f"\\x{byte:02x}" for byte in folded.encode())
                for folded in _UNICODE_FOLDS[char]
            ]
            out.append(f"(?:{'|'.join(options)})")
            continue
        out.append(char)
    return "".join(out)


def _hint(pattern: str) -> Any:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.case_sensitive = False
    options.never_capture = True
    return re2.compile(_with_folds(pattern).encode(), options)


def _utf8(text: str) -> bytes:
    # Lone surrogates (JSON may carry them) pass through: they are no letters anyway.
    return text.encode("utf-8", "surrogatepass")


# The shortest value a default rule can match; shorter strings are not scanned.
_MIN_SCANNED = 6
_GLOBAL_FLAGS = re.compile(r"^\(\?([aiLmsux]+)\)")
_KEY_CACHE_MAX = 10_000
# The verdict of a key no rule names: (secret, truncate).
_PLAIN = (False, False)


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
    # Value rules with a known hint (the defaults), each with its hint, and the others (run
    # over every value).
    hinted: tuple[tuple[re.Pattern[str], Any], ...]
    unhinted: tuple[re.Pattern[str], ...]
    # Any hint of a hinted rule (or of a secret key in JSON): one pass says whether a text
    # needs the rules at all.
    any_hint: Any = None
    # A secret-named JSON key (`JSON_KEY_HINT`), when the key rules are the defaults; None
    # with other key rules, whose JSON keys are then looked for in every JSON string.
    json_key_hint: Any = None
    # Key rules no hint covers: every string that may be JSON is read as JSON.
    json_always: bool = False


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
    hinted: list[tuple[re.Pattern[str], Any]] = []
    unhinted: list[re.Pattern[str]] = []
    hints: list[str] = []
    for pattern in config.value_patterns:
        hint = _HINTS.get(pattern)
        if hint is None:
            unhinted.append(re.compile(pattern))
        else:
            hinted.append((re.compile(pattern), _hint(hint)))
            hints.append(hint)
    json_key_hint = None
    json_always = False
    if keys is not None:
        if list(config.key_patterns) == list(DEFAULT_REDACTED_KEY_PATTERNS):
            hints.append(JSON_KEY_HINT)
            json_key_hint = _hint(JSON_KEY_HINT)
        else:
            json_always = True
    any_hint = _hint("|".join(f"(?:{h})" for h in hints)) if hints else None
    return CompiledRules(
        keys, truncate, tuple(hinted), tuple(unhinted), any_hint, json_key_hint, json_always
    )


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
        ]
        names.extend(event.name for event in record.events)
        self._prepare(scan, maps, names)
        for attributes in maps:
            self._attributes(attributes)
        if self._scan:
            record.name = self._text(record.name)
            record.status_message = self._text(record.status_message)
            record.service_name = self._text(record.service_name)
            record.scope_name = self._text(record.scope_name)
            for event in record.events:
                event.name = self._text(event.name)

    def log(self, record: LogRecord, scan: bool = True) -> None:
        if not self.active:
            return
        maps = [record.attributes, record.resource_attributes]
        self._prepare(
            scan, maps, [record.body, record.severity_text, record.event_name, record.service_name]
        )
        for attributes in maps:
            self._attributes(attributes)
        record.body = self._value(record.body)
        if self._scan:
            record.severity_text = self._text(record.severity_text)
            record.event_name = self._text(record.event_name)
            record.service_name = self._text(record.service_name)

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
