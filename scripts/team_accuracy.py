"""Attribution and findings on team runs: the Who&When logs (AG2 group chats, Magentic-One).

.venv/bin/python scripts/team_accuracy.py [--data FOLDER] [--json]
                                          [--door ag2 [--runs N,N,...] [--latency S]]

Imports every `Algorithm-Generated/N.json` and `Hand-Crafted/N.json` file through the team
importer and the offline pipeline (the path `mast-otel analyze` takes), then prints, for the
development split (files whose number is divisible by 4) and the held-out rest, per set:
- agent and step accuracy of the attribution (the responsible agent and the decisive step
  named against the benchmark's `mistake_agent` / `mistake_step`), of the earliest finding,
  and of the trivial baselines: the first agent, the most talkative agent, and the message
  before the first failed code execution; beside them the benchmark paper's best LLM judge;
- findings per run by mode;
- against the hand labels in `tests/labels/who_and_when/` (JSON lines: `set`, `file`,
  `reader`, `labels` with `mode` and `step`), per mode, separately for the development readers
  (G, K; G's labels count where both read a run) and the held-out reader (H): labelled
  positives, TP, FP, FN, precision and recall (a mode is found in a run when any finding of
  that mode is raised in it).
"stored attribution" is what the pipeline stores with each run's signature (its decisive span,
mapped back to the file's message): the one reading, whether a run is imported or sent live.

--door ag2: the `Algorithm-Generated` runs (or those numbered in --runs) are also replayed
through real AG2 with its own tracing to a real `mast-otel serve` (`tests/replay/`: each
recorded agent a ConversableAgent answered by a loopback server with its recorded messages,
the recorded speaker order, the terminal's recorded output from an executor that runs
nothing), and the stored reading of each run compared with the importer's: per split the
stored attribution's agent and step accuracy through the importer and through the door, the
number of runs whose reading differs (attribution: agent, decisive message, rule, chain;
findings: mode, rule, message), and each difference (`-` the importer's, `+` the door's).
--latency S makes every replayed model answer take S seconds.
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mast_otel.collector.importers import team  # noqa: E402
from tests.replay import teams  # noqa: E402
from tests.replay.doors import TEAM_DOORS  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "who-and-when"
SETS = ("Algorithm-Generated", "Hand-Crafted")
# The Who&When paper's best LLM judge (all-at-once), agent and step accuracy.
PUBLISHED = {"agent": 0.535, "step": 0.142}


def development(path: Path) -> bool:
    """Files whose number is divisible by 4 are the development split."""
    return int(path.stem) % 4 == 0


def load(folder: Path) -> list[dict[str, Any]]:
    runs = []
    for kind in SETS:
        for path in sorted((folder / kind).glob("*.json"), key=lambda p: int(p.stem)):
            doc = json.loads(path.read_text())
            messages, _, _ = team.turns(doc, str(path))
            runs.append(
                {
                    "kind": kind,
                    "file": path,
                    "split": "development" if development(path) else "held_out",
                    "agent": str(doc.get("mistake_agent", "")),
                    "step": int(doc.get("mistake_step", -1)),
                    "turns": messages,
                    "findings": [],
                    "stored": ("", -1),
                }
            )
    return runs


def analyse(runs: list[dict[str, Any]]) -> None:
    """Each set's files through the pipeline; readings joined to their runs by file name."""
    for kind in SETS:
        chosen = {run["file"].name: run for run in runs if run["kind"] == kind}
        for name, reading in teams.imported([run["file"] for run in chosen.values()]).items():
            run = chosen.get(name)
            if run is not None:
                run["reading"] = reading
                run["stored"] = (reading.agent, reading.step)
                run["findings"] = [
                    {"mode": mode, "rule": rule, "index": index}
                    for mode, rule, index in reading.findings
                ]


def first_failed_execution(turns: list[tuple[str, str, str]]) -> int:
    for index, (agent, _, text) in enumerate(turns):
        code = team.EXIT_CODE.search(text[:200])
        if team.is_executor(agent, text) and code and code["code"] != "0":
            return max(index - 1, 0)
    return -1


def baselines(run: dict[str, Any]) -> dict[str, tuple[str, int]]:
    turns = run["turns"]
    actors = [
        (i, agent)
        for i, (agent, _, text) in enumerate(turns)
        if agent.lower() not in team.HUMAN_ROLES and not team.is_executor(agent, text)
    ]
    first = actors[0] if actors else (0, "")
    talk = Counter(agent for _, agent in actors).most_common(1)
    failed = first_failed_execution(turns)
    earliest = min((f["index"] for f in run["findings"] if f["index"] >= 0), default=-1)
    return {
        "stored attribution": run["stored"],
        "earliest finding": (turns[earliest][0] if earliest >= 0 else "", earliest),
        "first agent": (first[1], first[0]),
        "most talkative agent": (talk[0][0] if talk else "", -1),
        "before first failed execution": (
            turns[failed][0] if failed >= 0 else "",
            failed,
        ),
    }


def _same_agent(named: str, truth: str) -> bool:
    norm = lambda s: re.sub(r"[^a-z0-9]", "", s.lower())  # noqa: E731
    return bool(named) and norm(named) == norm(truth)


def figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    methods: dict[str, dict[str, float]] = defaultdict(lambda: {"agent": 0.0, "step": 0.0})
    modes: Counter[str] = Counter()
    for run in runs:
        for method, (agent, step) in baselines(run).items():
            methods[method]["agent"] += _same_agent(agent, run["agent"])
            methods[method]["step"] += step == run["step"]
        modes.update(f["mode"] for f in run["findings"])
    n = len(runs) or 1
    return {
        "runs": len(runs),
        "methods": {m: {k: v / n for k, v in d.items()} for m, d in methods.items()},
        "findings_per_run": {mode: count / n for mode, count in sorted(modes.items())},
    }


LABELS = ROOT / "tests" / "labels" / "who_and_when"
# The development readers, the one whose labels count last; the held-out reader.
SPLITS = {
    "development (G, K)": ("reader_k.jsonl", "reader_g.jsonl"),
    "held out (H)": ("reader_h.jsonl",),
}


def load_labels(patterns: list[str]) -> dict[tuple[str, int], set[str]]:
    """(set, file number) → the modes a reader labelled in that run (a later file's reader
    replaces an earlier one's on a run both read)."""
    out: dict[tuple[str, int], set[str]] = {}
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            for line in Path(path).read_text().splitlines():
                if line.strip():
                    doc = json.loads(line)
                    modes = {label["mode"] for label in doc.get("labels", [])}
                    out[(str(doc["set"]), int(doc["file"]))] = modes
    return out


def per_mode(runs: list[dict[str, Any]], labels: dict[tuple[str, int], set[str]]) -> list[str]:
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # TP, FP, FN
    labelled = [r for r in runs if (r["kind"], int(r["file"].stem)) in labels]
    for run in labelled:
        truth = labels[(run["kind"], int(run["file"].stem))]
        found = {f["mode"] for f in run["findings"]}
        for mode in truth | found:
            counts[mode][0 if mode in truth and mode in found else 1 if mode in found else 2] += 1
    lines = [f"per mode on {len(labelled)} labelled runs: mode  pos  TP  FP  FN  prec  recall"]
    for mode in sorted(counts):
        tp, fp, fn = counts[mode]
        prec = f"{tp / (tp + fp):.2f}" if tp + fp else "-"
        rec = f"{tp / (tp + fn):.2f}" if tp + fn else "-"
        lines.append(f"  {mode}  {tp + fn:3}  {tp:3} {fp:3} {fn:3}  {prec:>5}  {rec:>5}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--labels", type=Path, default=LABELS, help="the labels' folder")
    parser.add_argument("--door", choices=sorted(TEAM_DOORS), help="also replay through a door")
    parser.add_argument("--runs", default="", help="with --door: these file numbers only")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds a model answer takes")
    args = parser.parse_args(argv)
    runs = load(args.data)
    analyse(runs)
    if args.door:
        chosen = [int(x) for x in args.runs.split(",") if x.strip()]
        print(door_report(runs, args.data, args.door, chosen, args.latency))
        return 0
    result: dict[str, Any] = {}
    for split in ("development", "held_out"):
        for kind in (*SETS, "all"):
            chosen = [r for r in runs if r["split"] == split and kind in (r["kind"], "all")]
            result[f"{split} {kind}"] = figures(chosen)
    labels = {
        split: load_labels([str(args.labels / name) for name in names])
        for split, names in SPLITS.items()
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for name, block in result.items():
        print(f"\n{name} ({block['runs']} runs)   agent   step")
        for method, acc in block["methods"].items():
            print(f"  {method:32} {acc['agent']:.2f}    {acc['step']:.2f}")
        print(
            f"  {'published best LLM judge':32} {PUBLISHED['agent']:.2f}    {PUBLISHED['step']:.2f}"
        )
        print(
            "  findings per run: "
            + ", ".join(f"{m} {v:.2f}" for m, v in block["findings_per_run"].items())
        )
    for split, labelled in labels.items():
        if labelled:
            print(f"\n{split}")
            print("\n".join(per_mode(runs, labelled)))
    return 0


def door_report(
    runs: list[dict[str, Any]], data: Path, door: str, numbers: list[int], latency_s: float
) -> str:
    """The AG2 runs replayed through `door`, their readings against the importer's."""
    kind = "Algorithm-Generated"
    mine = {int(r["file"].stem): r for r in runs if r["kind"] == kind}
    numbers = numbers or sorted(mine)
    got, seconds = teams.replayed(door, data / kind, numbers, latency_s=latency_s)
    lines = [
        f"== door {door}: {len(got)} {kind} runs replayed in {seconds['total']:.0f}s "
        f"(latency {latency_s}s an answer) ==",
        f"{'':28} {'agent':>6} {'step':>6}   runs",
    ]
    differing: dict[int, list[str]] = {}
    for number in sorted(got):
        diff = teams.differences(mine[number]["reading"], got[number])
        if diff:
            differing[number] = diff
    for split in ("development", "held_out", "all"):
        chosen = [n for n in sorted(got) if split in (mine[n]["split"], "all")]
        if not chosen:
            continue
        for name, readings in (("importer", {n: mine[n]["reading"] for n in chosen}), (door, got)):
            agent = sum(_same_agent(readings[n].agent, mine[n]["agent"]) for n in chosen)
            step = sum(readings[n].step == mine[n]["step"] for n in chosen)
            lines.append(
                f"{split + ' ' + name:28} {agent / len(chosen):6.2f} {step / len(chosen):6.2f}"
                f"   {len(chosen)}"
            )
    lines.append(f"runs differing: {len(differing)} of {len(got)}")
    for number, diff in differing.items():
        lines += [f"{kind}/{number}.json: {line}" for line in diff]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
