"""Per-run windows: ordering within the grace period, the ways a run closes, and the bounds,
each counted when hit."""

from __future__ import annotations

from collections.abc import Iterable

from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run
from mast_otel.processors.window import RunWindows, WindowConfig


class Recorder(DetectorRun):
    """Records the order in which steps reach detectors, and when the run closed."""

    seen: list[tuple[str, str]]
    closed: list[tuple[str, str]]

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        Recorder.seen.append((run.trace_id, step.name))
        return ()

    def on_close(self, run: Run) -> Iterable[Finding]:
        Recorder.closed.append((run.trace_id, run.closed_by))
        return ()


def windows(**overrides: float) -> RunWindows:
    Recorder.seen, Recorder.closed = [], []
    return RunWindows(WindowConfig(**overrides), lambda run: [Recorder()])  # type: ignore[arg-type]


def step(name: str, start_s: float, trace: str = "t1", root: bool = False, **attrs) -> Step:
    return Step(
        trace_id=trace,
        span_id=f"{trace}-{name}",
        parent_span_id="" if root else "root",
        name=name,
        kind=StepKind.TOOL,
        start_ns=int(start_s * 1e9),
        end_ns=int(start_s * 1e9) + 1,
        dialect="genai",
        run_attributes=attrs,
    )


def test_steps_arriving_out_of_order_within_grace_are_released_in_start_order():
    w = windows(grace_s=1.0)
    w.add(step("b", 2), now=0.0)
    w.add(step("a", 1), now=0.5)
    w.tick(0.9)
    assert Recorder.seen == []  # still within the grace period
    w.tick(1.6)
    assert Recorder.seen == [("t1", "a"), ("t1", "b")]
    assert w.stats.steps_late == 0


def test_a_step_later_than_grace_is_still_processed_and_counted_as_late():
    w = windows(grace_s=0.5)
    w.add(step("b", 2), now=0.0)
    w.tick(1.0)
    w.add(step("a", 1), now=1.0)
    w.tick(2.0)
    assert Recorder.seen == [("t1", "b"), ("t1", "a")]
    assert w.stats.steps_late == 1


def test_run_closes_after_root_arrives_plus_grace():
    w = windows(grace_s=0.5)
    w.add(step("tool", 1), now=0.0)
    w.add(step("root", 0, root=True), now=0.1)
    assert w.tick(0.5).signatures == []
    out = w.tick(0.7)
    assert [s.trace_id for s in out.signatures] == ["t1"]
    assert Recorder.closed == [("t1", "root_ended")]
    assert out.signatures[0].close_reason == "root_ended"
    assert w.active_runs == 0


def test_explicit_end_closes_the_run_without_its_root():
    w = windows(grace_s=0.0)
    w.add(step("last", 1, **{"mast.run.end": True}), now=0.0)
    out = w.tick(0.0)
    assert Recorder.closed == [("t1", "explicit_end")]
    assert out.signatures[0].steps == 1


def test_idle_runs_close_and_late_spans_after_close_are_counted_not_reopened():
    w = windows(grace_s=0.0, idle_timeout_s=10.0)
    w.add(step("a", 1), now=0.0)
    w.add(step("x", 1, trace="t2"), now=8.0)
    out = w.tick(10.5)
    assert [s.trace_id for s in out.signatures] == ["t1"]
    assert Recorder.closed == [("t1", "idle")]
    w.add(step("b", 2), now=11.0)
    assert w.stats.steps_after_close == 1
    assert w.active_runs == 1  # t2 still open


def test_eviction_closes_the_least_recently_active_run():
    w = windows(grace_s=0.0, max_active_runs=2)
    w.add(step("a", 1, trace="t1"), now=0.0)
    w.add(step("a", 1, trace="t2"), now=1.0)
    w.add(step("b", 2, trace="t1"), now=2.0)  # t1 active again: t2 is now the oldest
    out = w.add(step("a", 1, trace="t3"), now=3.0)
    assert [s.trace_id for s in out.signatures] == ["t2"]
    assert Recorder.closed == [("t2", "evicted")]
    assert w.stats.runs_evicted == 1
    assert w.active_runs == 2


def test_duplicates_are_dropped_and_window_is_bounded():
    w = windows(grace_s=0.0, max_steps_per_run=3)
    for i in range(5):
        w.add(step(f"s{i}", i), now=float(i))
        w.tick(float(i))
    w.add(step("s4", 4), now=5.0)
    w.tick(5.0)
    assert w.stats.steps_duplicate == 1
    assert w.stats.steps_trimmed == 2
    out = w.close_all()
    assert out.signatures[0].steps == 5  # every step counted, only the last 3 kept


def test_pending_overflow_releases_at_once():
    w = windows(grace_s=100.0, max_pending_steps_per_run=3)
    for i in range(4):
        w.add(step(f"s{i}", i), now=0.0)
    assert len(Recorder.seen) == 4
    assert w.stats.pending_overflow == 1


def test_root_attributes_win_and_outcome_reaches_the_signature():
    w = windows(grace_s=0.0)
    w.add(step("child", 1, **{"mast.run.outcome": "failure"}), now=0.0)
    w.add(
        step("root", 0, root=True, **{"mast.run.outcome": "passed", "mast.run.score": 0.8}), now=0.0
    )
    sig = w.tick(0.0).signatures[0]
    assert sig.outcome == "success"
    assert sig.score == 0.8
