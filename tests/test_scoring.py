"""Fatal versus benign from outcomes: the lift per mode and model, the static prior until
enough outcomes exist, density and success rate; computed on plain counts and over a store."""

from __future__ import annotations

import json

from mast_otel.processors.conventions import FATAL_PRIOR
from mast_otel.processors.scoring import ScoringConfig, mode_lift, summarize
from tests.accuracy import replay
from tests.test_cli import run_cli

CONFIG = ScoringConfig(min_runs_per_outcome=10, min_lift=0.2)


def test_the_prior_stands_until_both_outcomes_have_enough_runs():
    few = mode_lift(
        "FM-1.3", failed_with=5, success_with=0, failed_runs=9, success_runs=30, config=CONFIG
    )
    assert few.basis == "prior" and few.fatal is ("FM-1.3" in FATAL_PRIOR) is False
    assert mode_lift("FM-3.3", 0, 0, 3, 3, CONFIG).fatal is True  # prior: fatal


def test_measured_lift_decides_once_outcomes_exist():
    fatal = mode_lift(
        "FM-1.3", failed_with=8, success_with=1, failed_runs=10, success_runs=10, config=CONFIG
    )
    assert fatal.basis == "measured" and fatal.fatal
    assert round(fatal.lift, 2) == 0.7
    benign = mode_lift(
        "FM-3.3", failed_with=3, success_with=3, failed_runs=10, success_runs=10, config=CONFIG
    )
    assert benign.basis == "measured" and not benign.fatal  # the prior is overruled


def test_summary_counts_density_and_success_rate():
    s = summarize(
        "m1",
        {"failure": 4, "success": 6, "": 2},
        {("FM-2.6", "failure"): 4, ("FM-2.6", "success"): 1},
        distinct_modes_failed=10,
        mean_score=0.5,
        config=CONFIG,
    )
    assert s.runs == 12 and s.success_rate == 0.6
    assert s.modes_per_failed_run == 2.5
    fm26 = next(m for m in s.modes if m.mode == "FM-2.6")
    assert fm26.rate_failed == 1.0 and round(fm26.rate_success, 3) == round(1 / 6, 3)


def test_summary_over_the_store_from_the_corpus(tmp_path):
    results = replay(dialects=["genai"], data_dir=str(tmp_path / "store"))
    out = run_cli("summary", "--data-dir", str(tmp_path / "store"), "--output", "json")
    assert out.returncode == 0, out.stderr
    (row,) = [json.loads(line) for line in out.stdout.splitlines()]
    failed = [r for r in results if r.run.scenario.outcome == "failure"]
    succeeded = [r for r in results if r.run.scenario.outcome == "success"]
    assert row["model"] == "gpt-4o"
    assert row["failed_runs"] == len(failed) and row["success_runs"] == len(succeeded)
    density = sum(len(r.found) for r in failed) / len(failed)
    assert abs(row["modes_per_failed_run"] - density) < 1e-9
    fm32 = next(m for m in row["modes"] if m["mode"] == "FM-3.2")
    expected = sum("FM-3.2" in r.found for r in failed) / len(failed)
    assert abs(fm32["rate_failed"] - expected) < 1e-9
    assert {m["basis"] for m in row["modes"]} == {"measured"}  # enough runs of each outcome
    table = run_cli("summary", "--data-dir", str(tmp_path / "store"))
    assert "modes per failed run" in table.stdout and "FM-3.2" in table.stdout
