"""Evidence a person trusts on team runs: every finding the pipeline raises on the whole
Who&When corpus (AG2 group chats, Magentic-One logs) names something real of its run (an agent
of the run, a call it made, or a value its messages hold), every excerpt it quotes is the
run's own text, and its subject is not a bare "the agent" / "the model" where the run's agent
has a name."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from mast_otel.collector.analyze import analyze_files
from mast_otel.collector.config import load_config
from mast_otel.collector.importers import team
from mast_otel.processors.model import Finding
from tests.corpora import who_and_when_dir
from tests.detectors.test_finding_evidence import problems

# Words of the messages' own templates: naming one of them names nothing of the run.
TEMPLATE = frozenset(
    re.findall(
        r"\w+",
        """the and model user agent said told run call calls changed system without after before
    which that what with tool tools its final answer kept calling result results ended right
    failed failure recovery checking never value values message messages instruction held holds
    nor one them sum difference within source figure total times count asked more task done
    turns turn row between there another way first looked acted request single answers""",
    )
)
# A quoted excerpt: the text between matching quotes, at least a few characters long.
QUOTED = re.compile(
    r"'((?:[^'\\]|\\.){6,}?)'(?=[),:;.\s]|$)" r'|"((?:[^"\\]|\\.){6,}?)"(?=[),:;.\s]|$)'
)


# A call as a message shows it, `python({"code": "…"})`, cut or whole.
CALL = re.compile(r"\b(?P<tool>[A-Za-z_][\w.-]*)\((?P<args>\{.*?)(?:…\)|\}\))")


@lru_cache(maxsize=1)
def corpus() -> list[tuple[Path, dict[str, object], list[Finding]]]:
    """(file, the run's facts, its findings) for every Who&When file."""
    folder = who_and_when_dir()
    files = sorted(folder.glob("*/*.json"))
    traces = {}
    facts: dict[Path, dict[str, object]] = {}
    for path in files:
        (run,) = list(team.runs(str(path)))
        traces[run.trace_id] = path
        doc = json.loads(path.read_text())
        turns, task, _ = team.turns(doc, str(path))
        calls = {
            str(s.attributes.get("gen_ai.tool.name"))
            for s in run.spans
            if s.attributes.get("gen_ai.operation.name") == "execute_tool"
        }
        facts[path] = {
            "agents": {agent for agent, _, _ in turns} | {to for _, to, _ in turns if to},
            "calls": calls,
            "text": _flat(task + "\n" + "\n".join(text for _, _, text in turns)),
        }
    found: dict[Path, list[Finding]] = {path: [] for path in files}
    for finding in analyze_files(load_config(None), [str(p) for p in files]):
        found[traces[finding.trace_id]].append(finding)
    return [(path, facts[path], found[path]) for path in files]


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _unrepr(excerpt: str) -> str:
    """A quoted excerpt as its run wrote it (a repr's escapes undone)."""
    return _flat(
        excerpt.replace("\\n", "\n").replace("\\t", "\t").replace("\\'", "'").replace('\\"', '"')
    )


def _without_calls(message: str, facts: dict[str, object]) -> tuple[str, list[str]]:
    """The message with the calls it shows taken out, and those of them its run never made
    (a tool it never called, or arguments its messages do not hold)."""
    calls, text = facts["calls"], facts["text"]
    assert isinstance(calls, set) and isinstance(text, str)
    foreign = []
    for match in CALL.finditer(message):
        args = match["args"]
        try:
            shown = json.loads(args + "}") if not args.endswith("…") else None
        except json.JSONDecodeError:
            shown = None
        values = list(shown.values()) if isinstance(shown, dict) else []
        head = _unrepr(re.sub(r'^\{"\w+": "', "", args).rstrip("…"))[:20]
        held = all(_flat(str(v)) in text for v in values) if values else head in text
        if match["tool"] not in calls or not held:
            foreign.append(match.group()[:80])
    return CALL.sub(lambda m: m["tool"], message), foreign


def _names_something(message: str, facts: dict[str, object]) -> bool:
    agents, calls, text = facts["agents"], facts["calls"], facts["text"]
    assert isinstance(agents, set) and isinstance(calls, set) and isinstance(text, str)
    if any(re.search(rf"(?<![\w-]){re.escape(a)}(?![\w-])", message) for a in agents):
        return True
    words = set(re.findall(r"[A-Za-z0-9_@.$,-]{3,}", message))
    if words & calls:
        return True
    return any(w.lower() not in TEMPLATE and w.strip(".,") in text for w in words)


def _foreign_excerpts(message: str, text: str) -> list[str]:
    """The message's quoted excerpts that the run's text does not hold."""
    out = []
    for match in QUOTED.finditer(message):
        excerpt = match.group(1) or match.group(2) or ""
        for piece in _unrepr(excerpt).split("…"):
            piece = piece.strip()
            if len(piece) >= 6 and piece not in text:
                out.append(piece[:80])
    return out


def _nameless_subject(message: str, facts: dict[str, object]) -> bool:
    """ "the agent ..." / "the model ..." where the run's agents have names of their own."""
    return bool(re.match(r"(the (agent|model)|an agent)\b", message)) and bool(facts["agents"])


def test_the_check_reads_quotes_and_names() -> None:
    facts: dict[str, object] = {
        "agents": {"Data_Expert"},
        "calls": {"python"},
        "text": "exitcode: 1 The file has 42 rows. TERMINATE",
    }
    assert _names_something("Data_Expert kept calling tools after its final answer", facts)
    assert _names_something("the run ended right after python failed", facts)
    assert not _names_something("the receiver never acted on the request", facts)
    assert _foreign_excerpts("said 'The file has 42 rows.'", str(facts["text"])) == []
    assert _foreign_excerpts("said 'The file has 43 rows.'", str(facts["text"])) != []
    assert _nameless_subject("the model said the task is done", facts)
    shown = 'Data_Expert re-ran python({"code": "print(len(rows))…) that Data_Expert had run'
    assert _without_calls(shown, facts)[1] != []  # its messages never held that code
    facts["text"] = str(facts["text"]) + " print(len(rows)) "
    taken_out = "Data_Expert re-ran python that Data_Expert had run"
    assert _without_calls(shown, facts) == (taken_out, [])


def test_every_finding_on_the_team_corpus_names_something_of_its_run() -> None:
    runs = corpus()
    assert len(runs) == 92
    assert sum(len(found) for _, _, found in runs) > 50
    bad = []
    for path, facts, found in runs:
        for finding in found:
            message, calls = _without_calls(finding.message, facts)
            wrong = problems(message)
            if calls:
                wrong.append(f"shows calls its run never made: {calls[:2]}")
            if not _names_something(message, facts):
                wrong.append("names nothing of its run")
            if _nameless_subject(message, facts):
                wrong.append("a nameless agent where the run's agent has a name")
            foreign = _foreign_excerpts(message, str(facts["text"]))
            if foreign:
                wrong.append(f"quotes what its run never said: {foreign[:2]}")
            if wrong:
                where = f"{path.parent.name}/{path.name}"
                bad.append((where, finding.mode, finding.rule, finding.message[:140], wrong))
    assert bad == [], f"{len(bad)} findings with untrustworthy evidence:\n" + "\n".join(
        map(str, bad[:20])
    )
