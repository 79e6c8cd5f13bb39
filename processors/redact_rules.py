"""The redaction rules: as configured (`RedactionConfig`), the default key and value rules,
the RE2 screen that runs them only where they can match, and their compiled form.

Nearly no record holds a secret, so the value rules run only where they can match: each
default rule has a hint (what every match of it contains), and RE2 looks for all hints in one
linear pass, ignoring ASCII case (where Python's engine would try every rule at every
position). Rules given in the configuration that are not defaults have no hint and run over
every value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import re2

__all__ = [
    "DEFAULT_REDACTED_KEY_PATTERNS",
    "DEFAULT_REDACTED_VALUE_PATTERNS",
    "JSON_KEY_HINT",
    "CompiledRules",
    "RedactionConfig",
    "compile_rules",
    "wire_key_hint",
]

DEFAULT_REDACTED_KEY_PATTERNS: tuple[str, ...] = (
    r"(^|[._-])(password|passwd|pwd|passphrase|secret|client[_-]?secret|api[_-]?key"
    r"|access[_-]?key|secret[_-]?access[_-]?key|account[_-]?key|shared[_-]?access[_-]?key"
    r"|secret[_-]?key|private[_-]?key|token|auth[_-]?token|access[_-]?token|refresh[_-]?token"
    r"|session[_-]?token|api[_-]?token|id[_-]?token|authorization|proxy[_-]?authorization"
    r"|cookie|set[_-]?cookie|credentials?|connection[_-]?string|jwt)$",
)

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
    # Basic: a digit, capital, + / or = past the first character ("basic sentences",
    # "Basic Training" are words).
    r"(?i:\bbasic\s+)(?=[A-Za-z0-9+/][a-z]*[0-9A-Z+/=])(?P<secret>[A-Za-z0-9+/]{8,}={0,2})",
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


# In an OTLP protobuf request, what any key the default key rules name, or any flag an
# argument list's secret follows, leaves in the bytes: a key ends with one of the rules' words
# and is followed by its value's field tag (0x12); a flag starts with a dash. A request
# holding neither, and no value rule's hint, has nothing the rules change.
_WIRE_KEY_HINT = (
    r"(?:passw(?:or)?d|pwd|passphrase|secret|key|token|authorization|cookie|credentials?"
    r"|string|jwt)\x12"
    r"|-[a-z_-]*(?:token|pass|secret|key)"
)


def wire_key_hint(config: RedactionConfig) -> Any:
    """The RE2 screen for keys and argument flags in a protobuf request's bytes
    (`_WIRE_KEY_HINT`), or None when the key rules are not the defaults (or truncation rules
    are set): their keys have no known hint, and every record's keys must be read."""
    if list(config.key_patterns) != list(DEFAULT_REDACTED_KEY_PATTERNS):
        return None
    if config.truncate_key_patterns:
        return None
    return _hint(_WIRE_KEY_HINT)


_GLOBAL_FLAGS = re.compile(r"^\(\?([aiLmsux]+)\)")


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
