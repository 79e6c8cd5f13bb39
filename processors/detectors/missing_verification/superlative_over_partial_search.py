"""FM-3.2's `superlative_over_partial_search`: the agent calls an option the best of all after
asking only some of the tools that answer the query.

A search is a successful read-only call whose arguments are a query (a JSON object naming no
record id: `{"origin": "ATL", "destination": "PHL", "date": "2024-05-24"}`, `{"sku": "KTL-2",
"region": "eu"}`). Two read tools answer the same query when they take the same argument
names (`search_direct_flight` and `search_onestop_flight`, `list_warehouse_stock` and
`list_supplier_stock`): each covers part of the options. The agent tells the user that an
option is the cheapest, fastest, earliest ... (`superlative_pattern`, as a fact: no question,
no intention to look, no condition: `superlative_hedge_pattern`) while, for a query it searched
in its latest stretch of searches (since the user last spoke before them), a tool known to take
the same query never ran with it: the claim covers options the agent never looked at. A claim
scoped to what was searched is no finding: the words right after the superlative, or the
user's latest message, name what the tools that ran cover and the others do not ("the cheapest
direct flight", or the user asking for direct flights, after `search_direct_flight` only).
A tool's own name can say it covers part of the options (`scoped_search_pattern`:
`search_onestop_flight`, `search_nearby_rooms`): when every tool that ran the query has such a
word in its name (the same one), the claim covers options no tool looked at although no other
tool was seen in the run; the same scoping words (said of the option, or asked for) silence it.

Which tools take the same query is learned from the calls made in this run (bounded by
`max_known_query_tools`): never from earlier runs, so that a run's findings do not depend on
which runs one process saw before it (with worker processes, on how runs were sharded; after
a restart, on what was replayed). Decided when the run closes; one finding per run, at the
claim.

    Fires: a parts shop whose run searched M5 nuts with `list_warehouse_stock` and
    `list_supplier_stock` (both taking `{"part", "region"}`); the user asks "Find me the
    cheapest M6 bolts."; only `list_warehouse_stock {"part": "M6 bolt", "region": "eu"}` runs,
    and the agent says "The cheapest offer is the warehouse's at 0.12 per bolt." Or a hotel
    desk whose only search, `search_nearby_rooms`, precedes "The cheapest room tonight is A2".
    Near miss: "The cheapest warehouse offer is 0.12." (scoped to what was searched), or the
    user having asked for the warehouse's; both stock tools run; a run that never showed a
    second tool taking the query (nor was offered one): the tool that ran may be all there is.
"""

from __future__ import annotations

import json
import re

from mast_otel.processors.classify import ActionKind, name_words
from mast_otel.processors.detectors.base import json_doc, short
from mast_otel.processors.detectors.missing_verification.context import MissingVerificationContext
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

_READ = ActionKind.READ
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN
# A sentence: up to a full stop, question or exclamation mark (not a decimal point) or a line end.
_SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?](?=\d))+(?:[.!?]|\n|$)")
# Queries remembered per stretch of searches, and agents whose tools are remembered.
_MAX_QUERIES = 256
_MAX_AGENTS = 64
# Words after a superlative that qualify it ("the cheapest direct round-trip flight").
_QUALIFIER_WORDS = 3
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
# A query searched in part: (the query, the tools that ran it, the tools known to take it that
# did not, the words of the names of those that ran limiting what they cover).
_Partial = tuple[str, list[str], list[str], list[str]]


def _squashed(text: str) -> str:
    """Lower-cased letters and digits only: "one-stop" and "One stop" read "onestop"."""
    return _NOT_ALNUM.sub("", text[:4000].lower())


class QueryTools:
    """The read tools each agent (service) of a run has been seen calling with a query, by the
    names of the query's arguments. Bounded."""

    __slots__ = ("by_agent", "declared", "max_tools")

    def __init__(self, max_tools: int) -> None:
        self.max_tools = max_tools
        self.by_agent: dict[str, dict[str, frozenset[str]]] = {}
        # Read tools the agent was offered (their definitions on its LLM calls), by their
        # parameters: such a tool takes any query whose argument names it has.
        self.declared: dict[str, dict[str, frozenset[str]]] = {}

    def declare(self, agent: str, tools: list[tuple[str, frozenset[str]]]) -> None:
        """The agent's offered read tools, once (an agent with none offered is remembered too)."""
        if len(self.declared) >= _MAX_AGENTS:
            del self.declared[next(iter(self.declared))]
        self.declared[agent] = dict(tools[: self.max_tools])

    def learn(self, agent: str, tool: str, keys: frozenset[str]) -> None:
        tools = self.by_agent.get(agent)
        if tools is None:
            if len(self.by_agent) >= _MAX_AGENTS:
                del self.by_agent[next(iter(self.by_agent))]
            tools = self.by_agent[agent] = {}
        if tool in tools or len(tools) < self.max_tools:
            tools[tool] = keys

    def taking(self, agent: str, keys: frozenset[str]) -> set[str]:
        """The tools known to take a query of exactly these argument names: seen taking it,
        or offered with parameters that include them."""
        seen = {tool for tool, known in self.by_agent.get(agent, {}).items() if known == keys}
        offered = self.declared.get(agent)
        if offered:
            seen.update(tool for tool, parameters in offered.items() if keys <= parameters)
        return seen


def query_of(context: MissingVerificationContext, step: Step) -> dict[str, object] | None:
    """The call's arguments when they are a query: a non-empty JSON object of plain values
    that names no record id (a lookup by id reads one record; it does not search)."""
    arguments = step.tool_arguments.strip()
    if not arguments.startswith("{") or len(arguments) > 2000:
        return None
    parsed = json_doc(arguments)
    if (
        not isinstance(parsed, dict)
        or not parsed
        or not all(isinstance(v, str | int | float) for v in parsed.values())
        or context.classifier.identifiers(arguments)
    ):
        return None
    return parsed


class PartialSearches:
    """Per run: the latest stretch of searches (query -> the tools that ran it) and the first
    best-of-all claim made while a tool taking one of those queries had not run it."""

    __slots__ = ("agent", "asked", "claim", "context", "queries", "recent", "tools", "turn_over")

    def __init__(self, context: MissingVerificationContext) -> None:
        self.context = context
        self.tools = QueryTools(context.config.max_known_query_tools)
        # Canonical query -> (its arguments, the tools that ran it, the first search), over
        # the run; and, per argument names, the queries of the latest stretch of searches
        # (a calculator's calls do not end a stretch of flight searches).
        self.queries: dict[str, tuple[dict[str, object], set[str], StepRef]] = {}
        self.recent: dict[frozenset[str], set[str]] = {}
        # Argument names whose stretch the user has spoken since: the next search starts anew.
        self.turn_over: set[frozenset[str]] = set()
        self.agent = ""
        # The user's latest words, letters and digits run together ("one-stop": "onestop").
        self.asked = ""
        # (the reply, the sentence, the queries it covers that were searched in part)
        self.claim: tuple[StepRef, str, list[_Partial]] | None = None

    def observe(self, step: Step, run: Run) -> None:
        if self.claim is not None or self.context.superlative is None:
            return
        if step.tools_offered and step.service not in self.tools.declared:
            self._declare(step)
        if step.kind is _HUMAN:
            self.turn_over = set(self.recent)
            self.asked = _squashed(step.input_text or step.output_text)
        elif step.kind is _TOOL and step.tool_name and not step.failed:
            self._search(step, run)
        elif step.kind is _LLM and self.recent and step.output_text and not step.tool_calls:
            self._claim(step, run)

    def _declare(self, step: Step) -> None:
        """The read tools the agent was offered, from the definitions on its LLM call (the
        first call that carries them: every call of a run usually carries the same)."""
        classify = self.context.classifier.classify
        offered = [
            (spec.name, frozenset(spec.parameters))
            for spec in step.tools_offered
            if spec.parameters and classify(spec.name, "").kind is _READ
        ]
        self.tools.declare(step.service, offered)

    def _search(self, step: Step, run: Run) -> None:
        context = self.context
        if context.classifier.classify(step.tool_name, step.tool_arguments).kind is not _READ:
            return
        query = query_of(context, step)
        if query is None:
            return
        self.agent = step.service
        names = frozenset(query)
        self.tools.learn(step.service, step.tool_name, names)
        if names in self.turn_over:
            self.recent.pop(names, None)
            self.turn_over.discard(names)
        key = json.dumps(query, sort_keys=True)
        known = self.queries.get(key)
        if known is not None:
            known[1].add(step.tool_name)
        elif len(self.queries) < _MAX_QUERIES:
            self.queries[key] = (query, {step.tool_name}, run.ref(step))
        else:
            return
        self.recent.setdefault(names, set()).add(key)

    def _claim(self, step: Step, run: Run) -> None:
        context = self.context
        assert context.superlative is not None
        for sentence in _SENTENCE.findall(step.output_text[:20_000]):
            if sentence.rstrip().endswith("?") or context.superlative_hedge.search(sentence):
                continue
            best = context.superlative.search(sentence)
            if best is None:
                continue
            # The words that qualify the superlative ("the cheapest direct flight").
            said = _squashed(" ".join(sentence[best.end() :].split()[:_QUALIFIER_WORDS]))
            partial: list[_Partial] = []
            for key in sorted(k for keys in self.recent.values() for k in keys):
                query, ran, _ = self.queries[key]
                others = self.tools.taking(self.agent, frozenset(query)) - ran
                if others:
                    # Words naming what the tools that ran cover and the others do not.
                    own = {w for tool in ran for w in name_words(tool)}
                    limits = own - {w for tool in others for w in name_words(tool)}
                else:
                    # No other tool seen: the limit the names of all that ran share, if any.
                    limits = self._shared_limits(ran)
                    if not limits:
                        continue
                # Said of the option or asked for by the user: the claim is scoped to them.
                if any(word in said or word in self.asked for word in limits):
                    continue
                partial.append((key, sorted(ran), sorted(others), sorted(limits)))
            if partial:
                self.claim = (run.ref(step), short(sentence.strip(), 200), partial)
                return

    def _shared_limits(self, ran: set[str]) -> set[str]:
        """The words every tool that ran has in its name saying it searches only part of the
        options (`scoped_search_pattern`: `search_onestop_flight`, `list_local_stock`)."""
        scoped = self.context.scoped_search
        if scoped is None:
            return set()
        shared: set[str] | None = None
        for tool in ran:
            words = {w for w in name_words(tool) if scoped.fullmatch(w)}
            shared = words if shared is None else shared & words
        return shared or set()

    def close(self, run: Run) -> list[Finding]:
        if self.claim is None:
            return []
        ref, said, partial = self.claim
        query, ran, others, limits = partial[0]
        if others:
            missing = f"{', '.join(others)}, which takes the same query, never ran it"
        else:
            names = "its name limits it" if len(ran) == 1 else "their names limit them"
            missing = f"{names} to {'/'.join(limits)} options and no other tool searched it"
        searches = [
            {"query": q, "ran": r, "not_run": o, **({} if o else {"limited_to": w})}
            for q, r, o, w in partial[:10]
        ]
        return [
            self.context.report.finding(
                at=ref,
                rule="superlative_over_partial_search",
                confidence=0.7,
                message=(
                    f"the agent said {said!r} after searching {query} with {', '.join(ran)} "
                    f"only: {missing}"
                    + (f" (and {len(partial) - 1} more searches alike)" if len(partial) > 1 else "")
                ),
                evidence=[ref, *(self.queries[p[0]][2] for p in partial[:5])],
                values={"said": said, "searches": searches},
                run=run,
            )
        ]
