"""What the commands print from the store is harmless text: names a sender chose (service,
model, span names, messages) cannot drive the terminal, and absurd time flags are refused in
one line before any query runs."""

from __future__ import annotations

import gc
import json

import pytest

from mast_otel.collector.cli import main
from mast_otel.collector.store import ChdbStore, migrate
from mast_otel.collector.store.batching import ClickHouseExporter
from tests.storedata import MINUTE, T0, finding, signature, span, trace_id

BASE = (T0 // MINUTE) * MINUTE
# Set the window title, clear the screen, a C1 control sequence introducer, a bell, and a
# line of its own.
HOSTILE = "svc\x1b]0;owned\x07\x1b[2J\x9b31m\x00\r\nFAKE LINE\u202edesrever"
CONTROLS = ("\x1b", "\x07", "\x9b", "\x00", "\r", "\u202e")


@pytest.fixture(autouse=True)
def _earlier_tests_garbage(capsys):
    """What these tests read is everything printed to stderr; objects an earlier test left
    for the garbage collector (a gRPC server's pending tasks print a traceback when they are
    collected) are collected first and what they print is set aside."""
    gc.collect()
    capsys.readouterr()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile-cli")
    store = ChdbStore(path)
    migrate(store)
    exporter = ClickHouseExporter(store, 10_000, 60)
    spans = [span(1, 0, BASE), span(1, 1, BASE + 1000, 0)]
    for record in spans:
        record.name = HOSTILE
        record.service_name = HOSTILE
    exporter.add_spans(spans)
    hostile = finding(1, 1, "FM-1.3", BASE + MINUTE, model=HOSTILE, service=HOSTILE)
    hostile.message = HOSTILE
    exporter.add_findings([hostile])
    sig = signature(1, BASE + 2 * MINUTE, {"FM-1.3": 1}, "failure", model=HOSTILE)
    sig.service = HOSTILE
    exporter.add_signatures([sig])
    exporter.flush(0, force=True)
    store.close()
    return path


COMMANDS = [
    ["signatures"],
    ["findings"],
    ["failing", "--since", "2023-01-01T00:00:00"],
    ["run", trace_id(1)],
    ["summary"],
    ["summary", "--by", "service"],
]


@pytest.mark.parametrize("output", ["table", "json"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_no_stored_value_reaches_the_terminal_raw(data_dir, capsys, command, output):
    code = main([*command, "--data-dir", str(data_dir), "--output", output])
    out = capsys.readouterr().out
    assert code == 0
    assert "svc\\x1b" in out or "svc\\u001b" in out, out  # the hostile rows were printed
    for char in CONTROLS:
        assert char not in out, (char, out)
    if output == "table":
        assert not any(line.startswith("FAKE LINE") for line in out.splitlines()), out
    else:
        # JSON output still says exactly what is stored.
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        assert HOSTILE in _strings(rows)


def _strings(node: object) -> set[str]:
    if isinstance(node, str):
        return {node}
    if isinstance(node, dict):
        node = list(node.values())
    if isinstance(node, list):
        return set().union(*map(_strings, node)) if node else set()
    return set()


@pytest.mark.parametrize(
    "args",
    [
        ["findings", "--since", "99999999d"],
        ["failing", "--since", "99999999999999d"],
        ["summary", "--since", "99999-01-01"],
        ["failing", "--since", "2300-01-01T00:00:00"],
        ["findings", "--since", "1960-01-01"],
        ["backfill", "--since", "1d", "--until", "99999999d"],
    ],
)
def test_an_absurd_since_is_one_line_and_exit_2(data_dir, capsys, args):
    code = main([*args, "--data-dir", str(data_dir)])
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mast-otel: --"), captured.err
    assert "Exception" not in captured.err and "Traceback" not in captured.err
