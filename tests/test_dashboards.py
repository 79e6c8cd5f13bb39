"""The generated dashboards: committed as the code generates them, loadable into the
foundation SDK's types without loss, and consistent (ids, layout, links, variables)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.runtime import UnknownDataquery
from grafana_foundation_sdk.models.dashboard import Dashboard

from mast_otel.dashboards import clickhouse, generate
from mast_otel.dashboards.clickhouse import ClickHouseQuery

ROOT = Path(__file__).resolve().parent.parent


def committed(uid: str) -> dict[str, Any]:
    return json.loads((ROOT / generate.GENERATED_DIR / f"{uid}.json").read_text("utf-8"))


def test_committed_files_are_what_the_code_generates():
    assert generate.stale(ROOT) == [], "run `mast-otel dashboards generate` and commit"


def test_generate_check_command(tmp_path):
    run = [
        sys.executable,
        "-m",
        "mast_otel.collector.cli",
        "dashboards",
        "generate",
        "--root",
        str(tmp_path),
    ]
    check = subprocess.run([*run, "--check"], capture_output=True, text=True, cwd=ROOT)
    assert check.returncode == 1 and "out of date" in check.stdout
    assert subprocess.run(run, capture_output=True, cwd=ROOT).returncode == 0
    again = subprocess.run([*run, "--check"], capture_output=True, text=True, cwd=ROOT)
    assert again.returncode == 0, again.stdout
    assert generate.stale(tmp_path) == []


@pytest.mark.parametrize("uid", sorted(generate.dashboards()))
def test_loads_into_the_sdk_types_without_loss(uid):
    clickhouse.register()
    data = committed(uid)
    loaded = Dashboard.from_json(data)
    again = json.loads(json.dumps(loaded, cls=JSONEncoder))
    assert again == data
    queries = [t for p in loaded.panels or [] for t in getattr(p, "targets", None) or []]
    assert queries, uid
    # Every query decoded into a typed query, none into the SDK's untyped fallback.
    assert not any(isinstance(q, UnknownDataquery) for q in queries)
    if uid != "mast-collector":
        assert any(isinstance(q, ClickHouseQuery) for q in queries)


def panels(uid: str) -> list[dict[str, Any]]:
    return committed(uid)["panels"]


@pytest.mark.parametrize("uid", sorted(generate.dashboards()))
def test_layout_ids_and_data_sources(uid):
    dashboard = committed(uid)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    occupied: set[tuple[int, int]] = set()
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        cells = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & occupied, f"{panel['title']} overlaps another panel"
        occupied |= cells
        assert panel["title"] and panel["description"]
        source = panel["datasource"]["uid"]
        assert source.startswith("${") and source[2:-1] in variables
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
            text = target.get("rawSql") or target.get("expr")
            for name in re.findall(r"\$\{?(\w+)", text):
                assert name.startswith("__") or name in variables, (panel["title"], name)


def test_latest_fatal_findings_link_to_the_run_dashboard():
    run = committed("mast-run")
    trace_variable = {v["name"] for v in run["templating"]["list"]}
    assert "trace_id" in trace_variable
    (table,) = [p for p in panels("mast-overview") if p["title"] == "Latest fatal findings"]
    (override,) = [
        o for o in table["fieldConfig"]["overrides"] if o["matcher"]["options"] == "TraceId"
    ]
    (link,) = override["properties"][0]["value"]
    assert link["url"].startswith(f"/d/{run['uid']}/")
    assert "var-trace_id=${__value.raw}" in link["url"] and "${__url_time_range}" in link["url"]


def test_every_filter_variable_defaults_to_all():
    for uid in ("mast-overview", "mast-models"):
        templating = {v["name"]: v for v in committed(uid)["templating"]["list"]}
        for name in ("service", "agent", "model", "environment"):
            variable = templating[name]
            assert variable["multi"] and variable["includeAll"]
            assert variable["current"]["value"] == ["$__all"]
            assert variable["datasource"]["type"] == clickhouse.PLUGIN_ID
