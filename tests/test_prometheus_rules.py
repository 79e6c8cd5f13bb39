"""The Prometheus rules pass the real `promtool` (Debian's prometheus package): syntax, and
unit tests that show each alert firing and staying silent. The dashboards' PromQL goes through
promtool's parser too, as recording rules."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from mast_otel.dashboards import collector_health, generate

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / generate.PROMETHEUS_RULES
PROMTOOL = shutil.which("promtool")


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL, "promtool is missing: run scripts/system-deps.sh (Debian package prometheus)"
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_rules_pass_promtool_check():
    result = promtool("check", "rules", RULES.name, cwd=RULES.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 7 rules found" in result.stdout


def test_rules_unit_tests_pass():
    result = promtool("test", "rules", "mast-otel-rules.test.yml", cwd=RULES.parent)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_firing_case():
    tests = yaml.safe_load((RULES.parent / "mast-otel-rules.test.yml").read_text("utf-8"))
    fired = {
        case["alertname"]
        for group in tests["tests"]
        for case in group.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    silent = {
        case["alertname"]
        for group in tests["tests"]
        for case in group.get("alert_rule_test", [])
        if not case.get("exp_alerts")
    }
    rules = yaml.safe_load(RULES.read_text("utf-8"))
    names = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert fired == names
    # Silence is shown by an empty expectation or by series in the same test that do not fire.
    assert silent | {"MastOtelStoreWriteErrors", "MastOtelFatalFindingsSpike"} >= names


def test_a_broken_rule_fails_the_check(tmp_path):
    """promtool really parses: the same file with a broken expression is refused."""
    broken = RULES.read_text("utf-8").replace(
        "absent(mast_otel_build_info)", "absent(mast_otel_build_info", 1
    )
    (tmp_path / "rules.yml").write_text(broken, "utf-8")
    assert promtool("check", "rules", "rules.yml", cwd=tmp_path).returncode != 0


def test_dashboard_promql_parses(tmp_path):
    # $__rate_interval and $instance are Grafana's; give them what Grafana would.
    rules = [
        {
            "record": f"mast_otel:dashboard_{key}",
            "expr": expr.replace("$__rate_interval", "2m").replace("$instance", ".*"),
        }
        for key, expr in collector_health.PROMQL.items()
    ]
    (tmp_path / "dashboard.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}), "utf-8"
    )
    result = promtool("check", "rules", "dashboard.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
