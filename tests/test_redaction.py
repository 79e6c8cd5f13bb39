"""Redaction screens before it scans: a protobuf request in which no rule's hint appears has
only its keys checked. These tests hold the screen to what it claims: every text a default
rule matches also holds that rule's hint (so screening never lets a secret through), clean
requests skip the value scan and still lose secret keys, and what cannot be screened (JSON,
rules without hints) is scanned."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel.collector.otlp.decode import decode_spans, parse_trace_request
from mast_otel.processors.redact import Redactor
from mast_otel.processors.redact_rules import (
    DEFAULT_REDACTED_VALUE_PATTERNS,
    RedactionConfig,
    compile_rules,
)

RULES = compile_rules(RedactionConfig())

# Pieces of secrets and of the text around them, with the characters that make screening
# hard: Unicode spaces, letters that IGNORECASE folds to ASCII (Kelvin sign, long s, dotted
# and dotless i), multi-byte letters, and ASCII separators Python counts as whitespace.
FRAGMENTS = [
    "bearer",
    "Bearer",
    "BASIC",
    "basic",
    " ",
    "\t",
    "\n",
    "\x0b",
    "\x1c",
    "\u00a0",
    "\u2003",
    "\u3000",
    "=",
    ":",
    '"',
    "'",
    "--",
    "-",
    "token",
    "to\u212aen",
    "TOKEN",
    "password",
    "pa\u017f\u017fword",
    "PASSWD",
    "pwd",
    "secret",
    "api_key",
    "apiKey",
    "API-KEY",
    "access_token",
    "client-secret",
    "auth-token",
    "AKIA",
    "ASIA",
    "aws_secret_access_key",
    "AWS_SESSION_TOKEN",
    "postgres",
    "://",
    "admin",
    "@",
    "db",
    "/",
    "?",
    "ghp_",
    "gho_",
    "sk-",
    "sk-ant-",
    "sk-proj-",
    "xoxb-",
    "xoxp-",
    "eyJ",
    ".",
    "_",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----",
    "SecretAccessKey",
    "SessionToken",
    "aws_session_token",
    '\\"',
    "\\",
    "AccountKey",
    "SharedAccessKey",
    "SharedAccessSignature",
    "&sig",
    "?\u017fig",
    "github_pat_",
    "glpat-",
    "sk_live_",
    "rk_test_",
    "whsec_",
    "xoxe-",
    "xapp-1-",
    "hooks.slack.com/services/",
    "hoo\u212as.\u017flack.com/triggers/",
    "AIza",
    "ya29.",
    "SG.",
    "hf_",
    "npm_",
    "-u",
    "--user",
    "passphrase",
    "credentials",
    "dbPassword",
    "githubToken",
    ";",
    "abcdefghij",
    "ABCDEFGHIJKLMNOP",
    "0123456789",
    "Zz9",
    "é",
    "漢字",
    "\u0130",
    "\u0131",
    "\u212a",
    "\U0001f511",
]


def _hint_holds(text: str) -> int:
    """Assert every rule that matches `text` has its hint in it; the number that match."""
    lowered = text.encode("utf-8", "surrogatepass")
    matched = 0
    for rule, hint in RULES.hinted:
        if rule.search(text):
            matched += 1
            assert hint.search(lowered) is not None, (rule.pattern, text)
            assert RULES.any_hint.search(lowered) is not None, text
    return matched


def test_every_text_a_rule_matches_holds_its_hint():
    chance = random.Random(7)
    texts = ["".join(chance.choices(FRAGMENTS, k=chance.randint(1, 12))) for _ in range(20_000)]
    matched = [text for text in texts if _hint_holds(text)]
    # Not vacuous: a good share of the texts hold something a rule takes for a secret.
    assert len(matched) > 2_000


@settings(max_examples=1000, deadline=None, derandomize=True)
@given(st.text(min_size=8, max_size=80))
def test_hints_hold_on_arbitrary_text(text):
    _hint_holds(text)
    _hint_holds("Bearer " + text)
    _hint_holds("token=" + text)


def test_every_default_rule_has_a_hint_and_known_secrets_are_caught():
    assert len(RULES.hinted) == len(DEFAULT_REDACTED_VALUE_PATTERNS) and not RULES.unhinted
    for secret in (
        "Authorization: Bearer abcdefghijklmnop",
        "Authorization:\u2003bearer\u00a0abcdefghijklmnop",
        "Basic dXNlcjpwYXNzd29yZA==",
        "AKIAABCDEFGHIJKLMNOP",
        "AWS_SECRET_ACCESS_KEY=abcdefghijklmnopqrstuvwx",
        "postgres://admin:hunter2@db:5432/shop",
        "mysql://\u540d\u524d:\u79d8\u5bc6@db",
        "deploy --token=tok_123456",
        "login --password\thunter2",
        '{"api_key": "abc123"}',
        "to\u212aen: supersecret",
        "ghp_" + "a" * 36,
        "sk-ant-" + "b" * 30,
        "xoxb-1234567890-abc",
        "eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeKKF2Q",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQdGBF\n-----END PGP PRIVATE KEY BLOCK-----",
        '"SecretAccessKey": "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"',
        '{\\"SessionToken\\": \\"FwoGZXIvYXdzEJr//////////wEaDEXAMPLE\\"}',
        "AccountKey=Zm9vYmFyYmF6cXV4cXV1eA==;EndpointSuffix=core.windows.net",
        "SharedAccessKey=Zm9vYmFyYmF6cXV4cXV1eA=",
        "https://a.blob.core.windows.net/c?sv=2022&sig=abcdefghijklmnop%3D",
        "github_pat_" + "A" * 22 + "_" + "b" * 59,
        "glpat-" + "x" * 20,
        "sk_live_" + "c" * 24,
        "rk_live_" + "d" * 24,
        "whsec_" + "e" * 32,
        "xapp-1-A0123456789-1234567890123-abcdef",
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "AIza" + "f" * 35,
        "ya29." + "g" * 40,
        "SG." + "h" * 22 + "." + "i" * 43,
        "hf_" + "j" * 34,
        "npm_" + "k" * 36,
        "curl -u admin:s3cr3t https://registry",
        "dbPassword=s3cr3t",
        '{"githubToken": "s3cr3t"}',
    ):
        assert any(rule.search(secret) for rule, _ in RULES.hinted), secret
        _hint_holds(secret)
        assert Redactor(RedactionConfig()).needs_scan(_request(secret), "protobuf"), secret


def _request(*values: str, key: str = "note") -> bytes:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for i, value in enumerate(values):
        span = spans.add()
        span.trace_id, span.span_id, span.name = bytes([i + 1]) * 16, bytes([i + 1]) * 8, "s"
        for k, v in ((key, value), ("api_key", "kept only by its key"), ("n", "x" * 40)):
            kv = span.attributes.add()
            kv.key, kv.value.string_value = k, v
    return request.SerializeToString()


def _redacted(redactor: Redactor, body: bytes) -> list[dict]:
    scan = redactor.needs_scan(body, "protobuf")
    records = decode_spans(parse_trace_request(body)).records
    for record in records:
        redactor.span(record, scan)
    return [record.attributes for record in records]


def test_a_clean_request_skips_the_value_scan_and_still_redacts_secret_keys():
    redactor = Redactor(RedactionConfig())
    body = _request("kubectl get pods -n shop", "the api server answered 200 with 5 tokens")
    attributes = _redacted(redactor, body)
    assert redactor.stats["requests_screened"] == 1
    assert all(a["api_key"] == "[REDACTED]" for a in attributes)
    assert attributes[1]["note"] == "the api server answered 200 with 5 tokens"
    assert redactor.stats["keys_redacted"] == 2 and redactor.stats["values_redacted"] == 0


def test_a_request_with_a_secret_is_scanned_and_only_the_secret_goes():
    redactor = Redactor(RedactionConfig())
    body = _request("nothing here at all", "curl -H 'to\u212aen: s3cr3t' https://shop")
    attributes = _redacted(redactor, body)
    assert redactor.stats["requests_screened"] == 0
    assert attributes[0]["note"] == "nothing here at all"
    assert attributes[1]["note"] == "curl -H 'to\u212aen: [REDACTED]' https://shop"
    assert redactor.stats["values_redacted"] == 1


def test_json_bodies_and_rules_without_hints_are_always_scanned():
    body = _request("nothing to see")
    assert Redactor(RedactionConfig()).needs_scan(b'{"resourceSpans": []}', "json")
    custom = Redactor(RedactionConfig(value_patterns=[r"ticket-\d+"]))
    assert custom.needs_scan(body, "protobuf")
    off = Redactor(RedactionConfig(enabled=False))
    assert not off.needs_scan(body, "protobuf") and off.stats["requests_screened"] == 0


def test_a_body_full_of_keywords_and_near_misses_is_clean():
    text = (
        "max tokens: the token count, api calls, apikey rotation, a bearer of news, https://h/a:b "
    )
    assert not any(rule.search(text) for rule, _ in RULES.hinted)
    body = (text * 20_000).encode()
    redactor = Redactor(RedactionConfig())
    assert not redactor.needs_scan(body, "protobuf")
    assert redactor.stats["requests_screened"] == 1


# -- JSON in strings: the hint that decides whether a string is read as JSON ------------------

SECRET_KEYS = [
    "password",
    "dbPassword",
    "DB_PASSWORD",
    "githubToken",
    "x-api-key",
    "SecretAccessKey",
    "SessionToken",
    "client_secret",
    "pa\u017f\u017fword",
    "to\u212aen",
    "Authorization",
    "set-cookie",
    "connection_string",
    "credentials",
    "jwt",
    "passphrase",
]


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    key=st.sampled_from(SECRET_KEYS),
    depth=st.integers(min_value=0, max_value=3),
    spaces=st.sampled_from(["", " ", "\t", "\n  "]),
)
def test_every_json_string_with_a_secret_key_holds_the_json_key_hint(key, depth, spaces):
    redactor = Redactor(RedactionConfig())
    assert redactor._verdict(key)[0], key
    # Letters as they are (a key spelled with \\u escapes is not looked for).
    text = json.dumps({key: "v", "n": 1}, ensure_ascii=False).replace('":', '"' + spaces + ":")
    for _ in range(depth):
        text = json.dumps({"inner": text}, ensure_ascii=False)
    assert RULES.json_key_hint.search(text.encode("utf-8")) is not None, text
    assert RULES.any_hint.search(text.encode("utf-8")) is not None, text


def test_json_inside_json_strings_is_redacted_at_every_depth():
    from tests.secrets_corpus import PROBES

    redactor = Redactor(RedactionConfig())
    for probe in PROBES:
        if probe.name.startswith("json-"):
            record = _span({"tool.args": probe.text})
            redactor.span(record)
            out = record.attributes["tool.args"]
            assert not any(secret in out for secret in probe.secrets), (probe.name, out)
            json.loads(out)  # still JSON
    assert redactor.stats["json_redacted"] >= 3


# -- every field of a record --------------------------------------------------------------------


def _span(attributes=None, **fields):
    from mast_otel.processors.records import SpanEvent, SpanLink, SpanRecord

    record = SpanRecord(
        trace_id="1" * 32,
        span_id="2" * 16,
        parent_span_id="",
        name="execute_tool kubectl",
        start_ns=1,
        end_ns=2,
        attributes=dict(attributes or {}),
        events=[SpanEvent(1, "retry", {"k": "v"})],
        links=[SpanLink("3" * 32, "4" * 16, "", {"why": "follows"})],
    )
    for name, value in fields.items():
        setattr(record, name, value)
    return record


BEARER = "Bearer abcDEF0123456789xyz"


def test_names_events_links_resource_bytes_and_argv_are_redacted():
    from mast_otel.processors.records import SpanEvent, SpanLink
    from tests.secrets_corpus import ARGV, ARGV_EQUALS, ARGV_EQUALS_SECRET, ARGV_SECRET

    record = _span(
        {
            "dbPassword": "hunter2",
            "githubToken": "t0k3n",
            "x-api-key": "k3y",
            "argv": list(ARGV),
            "argv2": list(ARGV_EQUALS),
            "payload": f"Authorization: {BEARER}".encode(),
            "raw": b"\xff\xfe not text",
        },
        name=f"GET /orders {BEARER}",
        status_message=f"401 for {BEARER}",
        resource_attributes={"service.name": "shop", "vault.token": "s.abcdef", "k": BEARER},
        events=[SpanEvent(1, f"header {BEARER}", {"auth": BEARER})],
        links=[SpanLink("3" * 32, "4" * 16, "", {"header": BEARER, "sessionToken": "x1"})],
    )
    redactor = Redactor(RedactionConfig())
    redactor.span(record)
    dump = repr(record)
    for secret in (
        "hunter2",
        "t0k3n",
        "k3y",
        ARGV_SECRET,
        ARGV_EQUALS_SECRET,
        "abcDEF0123",
        "s.abc",
    ):
        assert secret not in dump, secret
    assert record.attributes["argv"][3:5] == ["--password", "[REDACTED]"]
    assert record.attributes["payload"] == b"Authorization: Bearer [REDACTED]"
    assert record.attributes["raw"] == b"\xff\xfe not text"
    assert record.name == "GET /orders Bearer [REDACTED]"
    assert record.events[0].name == "header Bearer [REDACTED]"
    assert record.links[0].attributes["sessionToken"] == "[REDACTED]"


def test_log_body_severity_and_event_name_are_redacted():
    from mast_otel.processors.records import LogRecord

    record = LogRecord(
        time_ns=1,
        severity_text=f"ERROR {BEARER}",
        body={"message": f"call failed with {BEARER}", "apiKey": "k3y"},
        event_name=f"auth {BEARER}",
        attributes={"cmd": ["psql", "--password", "pw1"]},
    )
    Redactor(RedactionConfig()).log(record)
    dump = repr(record)
    assert "abcDEF0123" not in dump and "k3y" not in dump and "pw1" not in dump, dump
    assert record.severity_text == "ERROR Bearer [REDACTED]"


def test_findings_and_signatures_are_redacted():
    from tests.storedata import finding, signature

    found = finding(1, 1, "FM-1.3", 5)
    found.message = f"same call {BEARER}"
    found.evidence = {"arguments": '{"password": "pw2"}', "raw": BEARER, "steps": ["a"]}
    sig = signature(1, 5, {})
    sig.service = f"svc {BEARER}"
    redactor = Redactor(RedactionConfig())
    redactor.finding(found)
    redactor.signature(sig)
    dump = repr(found) + repr(sig)
    assert "abcDEF0123" not in dump and "pw2" not in dump, dump
    assert found.evidence["steps"] == ["a"]


def test_the_corpus_is_caught_and_near_misses_are_kept():
    from tests.secrets_corpus import NEAR_MISSES, PROBES

    redactor = Redactor(RedactionConfig())
    for probe in PROBES:
        out = redactor.text(probe.text)
        assert not [s for s in probe.secrets if s in out], (probe.name, out)
    for text in NEAR_MISSES:
        assert redactor.text(text) == text
        record = _span({"note": text, "tool.args": json.dumps({"q": text})})
        before = repr(record)
        redactor.span(record)
        assert repr(record) == before, text


def test_a_secret_the_value_limit_falls_in_goes_whole():
    """The limits cut long values before redaction reads them: a cut inside a token would
    leave its start, too short for its rule, in the store. The cut moves back to a space."""
    from mast_otel.processors.limits import LimitsConfig, RecordLimits

    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvcHMtYWdlbnQifQ.c2lnbmF0dXJlLWZvci10ZXN0cw"
    for filler in range(900, 1060, 7):
        text = "log line " * (filler // 9) + f"token {jwt} end of the line " + "z " * 200
        record = _span({"tool.result": text})
        RecordLimits(LimitsConfig(max_attribute_value_bytes=1024)).span(record)
        Redactor(RedactionConfig()).span(record)
        stored = record.attributes["tool.result"]
        assert len(stored.encode()) <= 1024
        assert "eyJhbGciOiJIUzI1NiJ9.eyJzdWIi" not in stored, stored[-120:]
        assert not any(jwt[:n] in stored for n in range(8, len(jwt))), stored[-120:]
