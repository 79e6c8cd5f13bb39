"""Redaction screens before it scans: a protobuf request in which no rule's hint appears has
only its keys checked. These tests hold the screen to what it claims: every text a default
rule matches also holds that rule's hint (so screening never lets a secret through), clean
requests skip the value scan and still lose secret keys, and what cannot be screened (JSON,
rules without hints) is scanned."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.otlp.decode import decode_spans, parse_trace_request
from processors.redact import (
    DEFAULT_REDACTED_VALUE_PATTERNS,
    RedactionConfig,
    Redactor,
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
