"""The detectors on real runs: tau-bench's 200 GPT-4o airline runs against hand labels.

.venv/bin/python scripts/real_accuracy.py [--data FILE] [--labels GLOB ...] [--json]
                                          [--check] [--show-findings] [--config FILE]
                                          [--door NAME ... | --doors all]

Imports every run of the tau-bench file through the chat-transcript importer and the offline
pipeline (the path `mast-otel analyze` takes), then prints:
- per mode, on the labelled runs: labelled positives, TP, FP, FN, precision, recall (a mode is
  found in a run when any finding of that mode is raised in it), and for true positives how
  many have a finding within +-2 messages of a labelled message ("at the labelled step");
- recall over all labels, and the share of successful runs labelled clean that stay silent;
- every mode's lift over all runs: its share of failed runs, of successful runs, the
  difference in points and the ratio (the MAST study's method);
- where two readers labelled the same run, their agreement per mode (reader A's labels count
  for the figures).

Labels: JSON lines, one run each:
  {"index": 12, "task_id": 5, "trial": 0, "reward": 0.0, "reader": "A",
   "labels": [{"mode": "FM-1.1", "message": 7, "why": "..."}]}
`index` is the run's position in the file, `message` an index into its `traj`; `labels: []`
means the reader found no failure.

Without --labels, each set of labels on its own and all of them together (the targets and the
top level of --json are for all together, `sets` holds each):
- development: readers A and B (tests/labels/tau_airline/*.jsonl), which the first rules were
  written against;
- second development: readers C and D (tests/labels/tau_airline/holdout/*.jsonl), held out
  while the first rules were written, read while the next ones were;
- held out: readers E and F (tests/labels/tau_airline/holdout2/*.jsonl), labelled last and
  never read while writing rules.
Together they cover all 200 runs.

--check exits 1 when a target is missed: precision >= 0.8 for every mode with >= 3 labelled
positives, recall >= 0.6 over all labels, >= 90% of successful clean-labelled runs silent.
Exit status 2 with a one-line message for a missing or malformed file.

The runs are read with the tools the agent was offered (--tools, default
tests/labels/tau_airline/tools.json: the names and parameters of tau-bench's 14 airline
tools), which the file does not carry but an instrumented agent's LLM spans do
(`gen_ai.tool.definitions`); `--tools ""` reads the file as it is.

Doors (--door NAME, repeatable, or --doors all): the same runs also replayed through real
instrumentation (`tests/replay/`: a real OpenAI client answered by a loopback server with each
run's recorded turns, the recorded tool results and user turns in their places, one
`mast-otel serve` per door; doors: openai-v2-span, openai-v2-events, openinference,
openllmetry, openai-v2-tools, pydantic-ai: a pydantic-ai `Agent` playing the run with its own
instrumentation), the findings read back from each door's store. For every door
the same figures per label set, a summary across doors, the share of runs where the door finds
the same modes as the importer, and the runs whose findings (mode, rule, message index) differ
from the importer's, each differing finding on a line (`-` only the importer, `+` only the
door). --json adds `doors`: per door its figures, sets, seconds, same-modes share and
differences. The importer's figures (and --check) stay those of the top level. --latency S
makes every replayed model answer take S seconds (a real model's pace: spans then arrive over
the run's real duration), --parallel N replays N doors at once (default 2).
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mast_otel.collector.analyze import run_files  # noqa: E402
from mast_otel.collector.config import ConfigError, load_config  # noqa: E402
from mast_otel.collector.importers import ImportFormatError  # noqa: E402
from mast_otel.collector.importers.spans import MESSAGE_INDEX, RUN_INDEX  # noqa: E402
from mast_otel.collector.store.exporter import MemoryExporter  # noqa: E402
from mast_otel.processors.conventions import MODE_CODES  # noqa: E402
from tests.corpora import tau_file  # noqa: E402

LABELS = "tests/labels/tau_airline/*.jsonl"
HELD_OUT = "tests/labels/tau_airline/holdout/*.jsonl"
HELD_OUT_2 = "tests/labels/tau_airline/holdout2/*.jsonl"
TOOLS = "tests/labels/tau_airline/tools.json"
# Without --labels, the figures are given for each set of labels and for all of them together
# (the targets apply to all; see the module's docstring for what each set is).
LABEL_SETS = {
    "development": [LABELS],
    "second_development": [HELD_OUT],
    "held_out": [HELD_OUT_2],
}
STEP_TOLERANCE = 2
TARGET_PRECISION = 0.8
TARGET_PRECISION_MIN_POSITIVES = 3
TARGET_RECALL = 0.6
TARGET_SILENT = 0.9


class InputError(Exception):
    """A missing or malformed input file, said in one line."""


def default_data() -> Path:
    """tau-bench's airline runs, shipped compressed in tests/data (unpacked once)."""
    return tau_file()


@dataclass
class Label:
    index: int
    reader: str
    reward: float | None
    modes: dict[str, list[int]]  # mode → labelled message indices
    source: str


@dataclass
class RunResult:
    index: int
    trace_id: str
    task_id: Any
    trial: Any
    outcome: str
    findings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def modes(self) -> set[str]:
        return {f["mode"] for f in self.findings}


def load_labels(patterns: list[str]) -> dict[int, list[Label]]:
    """Labels by run index, every reader's, in file order."""
    by_index: dict[int, list[Label]] = defaultdict(list)
    for pattern in patterns:
        path = pattern if Path(pattern).is_absolute() else str(ROOT / pattern)
        for name in sorted(glob.glob(path)):
            for lineno, line in enumerate(Path(name).read_text("utf-8").splitlines(), start=1):
                if not line.strip():
                    continue
                where = f"{name}:{lineno}"
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{where}: malformed JSON: {exc.msg}") from exc
                by_index_label = _label(doc, where)
                by_index[by_index_label.index].append(by_index_label)
    return by_index


def _label(doc: Any, where: str) -> Label:
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected a JSON object")
    index = doc.get("index")
    labels = doc.get("labels")
    if not isinstance(index, int) or isinstance(index, bool):
        raise InputError(f"{where}: `index` must be the run's position (an integer)")
    if not isinstance(labels, list):
        raise InputError(f"{where}: `labels` must be a list ([] for a clean run)")
    modes: dict[str, list[int]] = defaultdict(list)
    for position, item in enumerate(labels):
        if not isinstance(item, dict) or item.get("mode") not in MODE_CODES:
            raise InputError(f"{where}: label {position} needs a `mode` among FM-1.1 .. FM-3.3")
        message = item.get("message")
        if message is not None and (not isinstance(message, int) or isinstance(message, bool)):
            raise InputError(f"{where}: label {position}: `message` must be an integer")
        modes[item["mode"]].append(message if message is not None else -1)
    reward = doc.get("reward")
    return Label(
        index=index,
        reader=str(doc.get("reader") or ""),
        reward=float(reward) if isinstance(reward, int | float) else None,
        modes=dict(modes),
        source=where,
    )


def analyse(data: Path, config_path: str | None, tools: str = TOOLS) -> list[RunResult]:
    """Every run of the file through the importer and the pipeline, with its findings; each
    run given the tool definitions of `tools` ("" for none) unless it carries its own."""
    if not data.is_file():
        raise InputError(f"{data}: not found (give the tau-bench file with --data)")
    config = load_config(config_path)
    exporter = MemoryExporter()
    with tempfile.TemporaryDirectory() as folder:
        run_files(config, [_with_tools(data, tools, Path(folder))], exporter)
    runs: dict[str, RunResult] = {}
    message_of: dict[tuple[str, str], int] = {}
    for span in exporter.spans:
        attrs = span.attributes
        index = attrs.get(MESSAGE_INDEX)
        if isinstance(index, int):
            message_of[(span.trace_id, span.span_id)] = index
        if not span.parent_span_id and isinstance(attrs.get(RUN_INDEX), int):
            runs[span.trace_id] = RunResult(
                index=int(attrs[RUN_INDEX]),  # type: ignore[arg-type]
                trace_id=span.trace_id,
                task_id=attrs.get("mast.import.task_id"),
                trial=attrs.get("mast.import.trial"),
                outcome=str(attrs.get("mast.run.outcome") or ""),
            )
    for finding in exporter.findings:
        run = runs.get(finding.trace_id)
        if run is None:
            continue
        run.findings.append(
            {
                "mode": finding.mode,
                "rule": finding.rule,
                "message_index": message_of.get((finding.trace_id, finding.span_id), -1),
                "span_id": finding.span_id,
                "message": finding.message,
            }
        )
    return sorted(runs.values(), key=lambda r: r.index)


def replay_doors(
    names: list[str],
    data: Path,
    tools: str,
    importer: list[RunResult],
    latency_s: float = 0.0,
    parallel: int = 2,
) -> dict[str, dict[str, Any]]:
    """Every run of the file through each door in `names`: per door its runs (as RunResult,
    task and trial from the importer's runs) and the seconds the replay took."""
    from tests.replay.doors import replay_doors as replay

    if not data.is_file():
        raise InputError(f"{data}: not found (give the tau-bench file with --data)")
    tools_path = ""
    if tools:
        tools_path = str(Path(tools) if Path(tools).is_absolute() else ROOT / tools)
    meta = {run.index: run for run in importer}
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="mast-replay-") as folder:
        results = replay(
            names, data, tools_path, Path(folder), parallel=parallel, latency_s=latency_s
        )
    for name, result in results.items():
        runs = []
        for index, replayed in sorted(result.runs.items()):
            known = meta.get(index)
            runs.append(
                RunResult(
                    index=index,
                    trace_id=replayed.trace_id,
                    task_id=known.task_id if known else None,
                    trial=known.trial if known else None,
                    outcome=replayed.outcome or (known.outcome if known else ""),
                    findings=replayed.findings,
                )
            )
        out[name] = {"runs": runs, "seconds": result.seconds}
    return out


def door_equivalence(importer: list[RunResult], door: list[RunResult]) -> dict[str, Any]:
    """How a door's findings compare with the importer's, run by run."""
    from tests.replay.doors import differences, same_modes_share

    ref = {r.index: r.findings for r in importer}
    got = {r.index: r.findings for r in door}
    diffs = differences(ref, got)
    return {
        "same_modes_share": same_modes_share(ref, got),
        "same_findings_runs": len(set(ref) | set(got)) - len(diffs),
        "differing_runs": len(diffs),
        "differences": {str(i): d for i, d in diffs.items()},
    }


def _with_tools(data: Path, tools: str, folder: Path) -> str:
    """The file to analyse: `data` itself, or a copy whose runs carry the tool definitions."""
    if not tools:
        return str(data)
    path = Path(tools) if Path(tools).is_absolute() else ROOT / tools
    try:
        definitions = json.loads(path.read_text("utf-8"))
        runs = json.loads(data.read_text("utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} or {data}: malformed JSON: {exc.msg}") from exc
    if not isinstance(definitions, list) or not isinstance(runs, list):
        raise InputError(f"{path}: expected a list of tool definitions; {data}: a list of runs")
    for run in runs:
        if isinstance(run, dict):
            run.setdefault("tools", definitions)
    copy = folder / data.name
    copy.write_text(json.dumps(runs), "utf-8")
    return str(copy)


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def figures(runs: list[RunResult], labels: dict[int, list[Label]]) -> dict[str, Any]:
    by_index = {run.index: run for run in runs}
    unknown = sorted(i for i in labels if i not in by_index)
    if unknown:
        raise InputError(f"labels name runs the file does not have: {unknown[:10]}")
    for index, readers in labels.items():
        for label in readers:
            outcome = by_index[index].outcome
            if label.reward is not None and (label.reward >= 1.0) != (outcome == "success"):
                raise InputError(
                    f"{label.source}: says reward {label.reward} but run {index} of the file "
                    f"is a {outcome or 'run without outcome'} (is `index` its position?)"
                )
    chosen: dict[int, Label] = {}
    for index, readers in labels.items():
        chosen[index] = next((lab for lab in readers if lab.reader.upper() == "A"), readers[0])

    per_mode: dict[str, dict[str, Any]] = {}
    total_tp = total_pos = 0
    for mode in MODE_CODES:
        tp = fp = fn = at_step = 0
        for index, label in chosen.items():
            labelled = mode in label.modes
            found = [f for f in by_index[index].findings if f["mode"] == mode]
            if labelled and found:
                tp += 1
                marks = [m for m in label.modes[mode] if m >= 0]
                if any(abs(f["message_index"] - m) <= STEP_TOLERANCE for f in found for m in marks):
                    at_step += 1
            elif found:
                fp += 1
            elif labelled:
                fn += 1
        positives = tp + fn
        total_tp += tp
        total_pos += positives
        per_mode[mode] = {
            "labelled_positives": positives,
            "tp": tp,
            "fp": fp,
            "fn": fn,
            "precision": _ratio(tp, tp + fp),
            "recall": _ratio(tp, positives),
            "tp_at_labelled_step": at_step,
        }

    clean_success = [
        i for i, label in chosen.items() if not label.modes and by_index[i].outcome == "success"
    ]
    silent = [i for i in clean_success if not by_index[i].findings]

    failed = [r for r in runs if r.outcome == "failure"]
    succeeded = [r for r in runs if r.outcome == "success"]
    lift: dict[str, dict[str, Any]] = {}
    for mode in MODE_CODES:
        in_failed = sum(mode in r.modes for r in failed)
        in_success = sum(mode in r.modes for r in succeeded)
        rate_f = _ratio(in_failed, len(failed)) or 0.0
        rate_s = _ratio(in_success, len(succeeded)) or 0.0
        lift[mode] = {
            "failed_runs_with": in_failed,
            "success_runs_with": in_success,
            "rate_failed": rate_f,
            "rate_success": rate_s,
            "difference_points": 100.0 * (rate_f - rate_s),
            "ratio": (rate_f / rate_s) if rate_s else None,
            "findings": sum(f["mode"] == mode for r in runs for f in r.findings),
        }

    agreement: dict[str, dict[str, Any]] = {}
    doubled = {i: readers for i, readers in labels.items() if len({r.reader for r in readers}) > 1}
    for mode in MODE_CODES:
        both = only_first = only_second = neither = 0
        for readers in doubled.values():
            first = next((r for r in readers if r.reader.upper() == "A"), readers[0])
            second = next(r for r in readers if r.reader != first.reader)
            a, b = mode in first.modes, mode in second.modes
            both += a and b
            neither += not a and not b
            only_first += a and not b
            only_second += b and not a
        n = len(doubled)
        agreement[mode] = {
            "runs": n,
            "both": both,
            "only_a": only_first,
            "only_b": only_second,
            "neither": neither,
            "agreement": _ratio(both + neither, n),
            "kappa": _kappa(both, only_first, only_second, neither),
        }

    return {
        "runs": len(runs),
        "failed_runs": len(failed),
        "success_runs": len(succeeded),
        "labelled_runs": len(chosen),
        "doubly_labelled_runs": len(doubled),
        "per_mode": per_mode,
        "recall_all_labels": _ratio(total_tp, total_pos),
        "labelled_positives": total_pos,
        "clean_success_runs": len(clean_success),
        "clean_success_silent": len(silent),
        "clean_success_silent_share": _ratio(len(silent), len(clean_success)),
        "lift": lift,
        "agreement": agreement,
    }


def _kappa(both: int, only_a: int, only_b: int, neither: int) -> float | None:
    n = both + only_a + only_b + neither
    if not n:
        return None
    observed = (both + neither) / n
    p_a, p_b = (both + only_a) / n, (both + only_b) / n
    expected = p_a * p_b + (1 - p_a) * (1 - p_b)
    return None if expected >= 1.0 else (observed - expected) / (1 - expected)


def check(result: dict[str, Any]) -> list[str]:
    """The targets missed, as sentences (empty: all met)."""
    missed = []
    if not result["labelled_runs"]:
        return ["no labelled runs"]
    for mode, row in result["per_mode"].items():
        if row["labelled_positives"] >= TARGET_PRECISION_MIN_POSITIVES and (
            row["precision"] is None or row["precision"] < TARGET_PRECISION
        ):
            missed.append(
                f"{mode}: precision {_fmt(row['precision'])} < {TARGET_PRECISION} "
                f"({row['labelled_positives']} labelled positives)"
            )
    recall = result["recall_all_labels"]
    if recall is None or recall < TARGET_RECALL:
        missed.append(f"recall over all labels {_fmt(recall)} < {TARGET_RECALL}")
    silent = result["clean_success_silent_share"]
    if silent is None or silent < TARGET_SILENT:
        missed.append(
            f"successful clean-labelled runs silent {_fmt(silent)} < {TARGET_SILENT} "
            f"({result['clean_success_silent']} of {result['clean_success_runs']})"
        )
    return missed


def _strip(doc: dict[str, Any]) -> dict[str, Any]:
    """A figures document for --json: without the per-run lift and the runs themselves."""
    return {k: v for k, v in doc.items() if k not in ("lift", "runs", "runs_of_door")}


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def report(result: dict[str, Any], sets: dict[str, dict[str, Any]] | None = None) -> str:
    lines = [
        f"{result['runs']} runs ({result['failed_runs']} failed, {result['success_runs']} "
        f"successful); {result['labelled_runs']} labelled, {result['doubly_labelled_runs']} "
        f"by two readers",
    ]
    for name, figures_of_set in (sets or {}).items():
        lines += ["", f"== {name.replace('_', '-')} labels =="]
        lines += labelled_table(figures_of_set)
    if sets:
        lines += ["", "== all labels (the targets apply here) =="]
    lines += labelled_table(result)
    lines += lift_and_agreement(result)
    return "\n".join(lines)


def labelled_table(result: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"On the {result['labelled_runs']} labelled runs (run x mode):",
        f"{'mode':<7} {'labelled':>8} {'TP':>4} {'FP':>4} {'FN':>4} {'prec':>5} {'recall':>6}"
        f" {'at step':>8}",
    ]
    for mode, row in result["per_mode"].items():
        if not (row["labelled_positives"] or row["fp"]):
            continue
        lines.append(
            f"{mode:<7} {row['labelled_positives']:>8} {row['tp']:>4} {row['fp']:>4} "
            f"{row['fn']:>4} {_fmt(row['precision']):>5} {_fmt(row['recall']):>6} "
            f"{row['tp_at_labelled_step']:>4}/{row['tp']:<3}"
        )
    lines += [
        "",
        f"recall over all labels: {_fmt(result['recall_all_labels'])} "
        f"({result['labelled_positives']} labelled positives)",
        f"successful runs labelled clean with no finding: {result['clean_success_silent']} of "
        f"{result['clean_success_runs']} ({_fmt(result['clean_success_silent_share'])})",
    ]
    return lines


def lift_and_agreement(result: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "Lift over all runs (share of failed vs successful runs with the mode):",
        f"{'mode':<7} {'findings':>8} {'failed':>7} {'success':>7} {'diff pp':>8} {'ratio':>6}",
    ]
    for mode, row in result["lift"].items():
        lines.append(
            f"{mode:<7} {row['findings']:>8} {row['rate_failed']:>7.1%} "
            f"{row['rate_success']:>7.1%} {row['difference_points']:>+8.1f} "
            f"{_fmt(row['ratio']):>6}"
        )
    if result["doubly_labelled_runs"]:
        lines += [
            "",
            f"Agreement of two readers ({result['doubly_labelled_runs']} runs):",
            f"{'mode':<7} {'both':>4} {'A only':>6} {'B only':>6} {'agree':>6} {'kappa':>6}",
        ]
        for mode, row in result["agreement"].items():
            if row["both"] or row["only_a"] or row["only_b"]:
                lines.append(
                    f"{mode:<7} {row['both']:>4} {row['only_a']:>6} {row['only_b']:>6} "
                    f"{_fmt(row['agreement']):>6} {_fmt(row['kappa']):>6}"
                )
    return lines


def doors_report(importer: dict[str, Any], doors: dict[str, dict[str, Any]]) -> str:
    """Per door its figures per label set, a summary across doors, and its differences from
    the importer."""
    from tests.replay.doors import readable

    names = ["importer", *doors]
    columns = [*importer.get("sets", {}), "all"]
    lines = ["", "== doors: recall over all labels (precision range over modes with >= 3) =="]
    header = f"{'door':<18}" + "".join(f" {c.replace('_', '-'):>20}" for c in columns)
    lines += [header + f" {'same modes':>10} {'runs differ':>11} {'seconds':>8}"]
    for name in names:
        doc = importer if name == "importer" else doors[name]
        cells = []
        for column in columns:
            f = doc if column == "all" else doc["sets"][column]
            precisions = [
                row["precision"]
                for row in f["per_mode"].values()
                if row["labelled_positives"] >= TARGET_PRECISION_MIN_POSITIVES
                and row["precision"] is not None
            ]
            span = f"{min(precisions):.2f}-{max(precisions):.2f}" if precisions else "-"
            cells.append(f"{_fmt(f['recall_all_labels'])} ({span})")
        eq = doc.get("equivalence", {})
        same = _fmt(eq.get("same_modes_share")) if eq else "-"
        differ = str(eq.get("differing_runs", "-")) if eq else "-"
        seconds = f"{doc['seconds']['total']:.0f}" if "seconds" in doc else "-"
        lines.append(
            f"{name:<18}"
            + "".join(f" {c:>20}" for c in cells)
            + f" {same:>10} {differ:>11} {seconds:>8}"
        )
    for name, doc in doors.items():
        lines += ["", f"== door {name} =="]
        for set_name, figures_of_set in doc["sets"].items():
            lines += ["", f"-- {set_name.replace('_', '-')} labels --"]
            lines += labelled_table(figures_of_set)
        lines += ["", "-- all labels --"]
        lines += labelled_table(doc)
        eq = doc["equivalence"]
        lines += [
            "",
            f"same modes as the importer: {_fmt(eq['same_modes_share'])} of runs; "
            f"same findings (mode, rule, message): {eq['same_findings_runs']} runs; "
            f"{eq['differing_runs']} differ (- importer only, + {name} only):",
        ]
        diffs = {int(i): d for i, d in eq["differences"].items()}
        lines.append(readable(diffs, limit=len(diffs)) or "none")
    return "\n".join(lines)


def show_findings(runs: list[RunResult]) -> str:
    lines = []
    for run in runs:
        for f in run.findings:
            lines.append(
                f"run {run.index} (task {run.task_id}, trial {run.trial}, {run.outcome or '-'}) "
                f"message {f['message_index']}: {f['mode']} {f['rule']}: {f['message']}"
            )
    return "\n".join(lines) or "no findings"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None, help="the tau-bench file")
    parser.add_argument(
        "--labels", action="append", help=f"label files (glob, repeatable; default {LABELS})"
    )
    parser.add_argument("--config", help="collector config (detector thresholds)")
    parser.add_argument(
        "--tools",
        default=TOOLS,
        help=f'tool definitions offered to the agent (default {TOOLS}; "" for none)',
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--show-findings", action="store_true", help="print every finding")
    parser.add_argument(
        "--door", action="append", default=[], help="also replay through this door (repeatable)"
    )
    parser.add_argument("--doors", choices=["all"], help="also replay through every door")
    parser.add_argument(
        "--latency",
        type=float,
        default=0.0,
        help="seconds each replayed model answer takes (default 0: as fast as it goes)",
    )
    parser.add_argument(
        "--parallel", type=int, default=2, help="doors replayed at once (default 2)"
    )
    args = parser.parse_args(argv)
    from tests.replay.doors import DOORS

    door_names = list(DOORS) if args.doors == "all" else list(dict.fromkeys(args.door))
    unknown_doors = [d for d in door_names if d not in DOORS]
    if unknown_doors:
        parser.error(f"unknown door {unknown_doors[0]!r} (doors: {', '.join(DOORS)})")
    try:
        label_sets = {"given": args.labels} if args.labels else LABEL_SETS
        loaded = {name: load_labels(globs) for name, globs in label_sets.items()}
        runs = analyse(args.data or default_data(), args.config, args.tools)
        everything: dict[int, list[Label]] = defaultdict(list)
        for labels in loaded.values():
            for index, readers in labels.items():
                everything[index] += readers
        result = figures(runs, dict(everything))
        sets = {} if args.labels else {n: figures(runs, lab) for n, lab in loaded.items()}
        doors: dict[str, dict[str, Any]] = {}
        if door_names:
            replayed = replay_doors(
                door_names,
                args.data or default_data(),
                args.tools,
                runs,
                latency_s=args.latency,
                parallel=args.parallel,
            )
            for name, got in replayed.items():
                doc = figures(got["runs"], dict(everything))
                doc["sets"] = {n: figures(got["runs"], lab) for n, lab in loaded.items()}
                doc["seconds"] = got["seconds"]
                doc["equivalence"] = door_equivalence(runs, got["runs"])
                doc["runs_of_door"] = got["runs"]
                doors[name] = doc
    except (InputError, ImportFormatError, ConfigError, OSError) as exc:
        print(f"real_accuracy: {exc}", file=sys.stderr)
        return 2
    missed = check(result)
    result["targets_missed"] = missed
    if args.json:
        if args.show_findings:
            result["findings"] = [
                {"run": r.index, "task_id": r.task_id, "trial": r.trial, **f}
                for r in runs
                for f in r.findings
            ]
        if sets:
            result["sets"] = {
                name: {k: v for k, v in f.items() if k not in ("lift", "runs")}
                for name, f in sets.items()
            }
        if doors:
            result["doors"] = {
                name: {
                    k: ({s: _strip(v) for s, v in value.items()} if k == "sets" else value)
                    for k, value in _strip(doc).items()
                }
                for name, doc in doors.items()
            }
            if args.show_findings:
                for name, doc in doors.items():
                    result["doors"][name]["findings"] = [
                        {"run": r.index, "task_id": r.task_id, "trial": r.trial, **f}
                        for r in doc["runs_of_door"]
                        for f in r.findings
                    ]
        print(json.dumps(result, indent=1))
    else:
        print(report(result, sets))
        if args.show_findings:
            print("\nFindings:\n" + show_findings(runs))
        if doors:
            importer_doc = dict(result, sets=sets)
            print(doors_report(importer_doc, doors))
            if args.show_findings:
                for name, doc in doors.items():
                    print(f"\nFindings through {name}:\n" + show_findings(doc["runs_of_door"]))
        if args.check:
            print("\ntargets: " + ("all met" if not missed else "missed: " + "; ".join(missed)))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
