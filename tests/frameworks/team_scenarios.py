"""The SRE team every team framework runs (a planner, a fixer, a verifier; the fixer's and the
verifier's tool calls run by the framework), each scenario as every agent's own turns and the
order the agents speak in, with what the collector must make of it.

Standard library only: the agent side of some frameworks runs in an environment of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.frameworks.model_server import Turn
from tests.frameworks.scenarios import apply, logs, restart, status

PLANNER, FIXER, VERIFIER = "planner", "fixer", "verifier"
TEAM = (PLANNER, FIXER, VERIFIER)
# Who runs the fixer's and the verifier's tool calls (a framework's executor).
RUNNER = "runner"

INSTRUCTION = "fixer: find why checkout crashes in namespace shop and fix it."
FIXED = (
    "checkout was OOMKilled at its 256Mi memory limit; I raised it to 512Mi and the "
    "read-back shows 3/3 pods ready and Running."
)
VERIFIED = "Verified: get_pod_status shows checkout 3/3 pods ready and Running. TERMINATE"
RESTARTED_ONLY = "I restarted checkout; it should be fine now."
APPROVED = "Approved: checkout is fixed and healthy. TERMINATE"
WORKING = "On it."
GAVE_UP = "The fixer did not act on it. TERMINATE"


@dataclass(frozen=True)
class TeamScenario:
    name: str
    # Each agent's own turns, in order.
    turns: dict[str, tuple[Turn, ...]]
    # Who speaks after the task, in order (the runner after each turn with calls).
    order: tuple[str, ...]
    # Mode → the rule of the one finding of that mode expected (a clean run expects nothing).
    expected: dict[str, str] = field(default_factory=dict)
    # A tool that fails in this scenario, and its error (the tool says so in its result,
    # "Error: ...", as harnesses that catch a tool's exception do).
    failing: tuple[str, str] = ("", "")
    # The verifier works in a chat of its own, handed only the team's last message (AG2's
    # sequential chats with carryover), after the others' chat.
    handed_on: bool = False


def _speakers(turns: dict[str, tuple[Turn, ...]], agents: tuple[str, ...]) -> tuple[str, ...]:
    """The speaking order for agents taking their turns in sequence: every turn with calls
    followed by the runner."""
    order: list[str] = []
    for agent in agents:
        for turn in turns[agent]:
            order.append(agent)
            if turn.calls:
                order.append(RUNNER)
    return tuple(order)


def _scenario(name: str, turns: dict[str, tuple[Turn, ...]], **kw: object) -> TeamScenario:
    agents = (PLANNER, FIXER) if kw.get("handed_on") else TEAM
    return TeamScenario(name, turns, _speakers(turns, agents), **kw)  # type: ignore[arg-type]


CLEAN = _scenario(
    "team_clean",
    {
        PLANNER: (Turn(answer=INSTRUCTION),),
        FIXER: (
            Turn((status(),)),
            Turn((logs(),)),
            Turn((apply(),)),
            Turn((status(),)),
            Turn(answer=FIXED),
        ),
        VERIFIER: (Turn((status(),)), Turn(answer=VERIFIED)),
    },
)
# The verifier approves a restart without running anything.
RUBBER_STAMP = _scenario(
    "verifier_approves_unchecked",
    {
        PLANNER: (Turn(answer=INSTRUCTION),),
        FIXER: (Turn((status(),)), Turn((restart(),)), Turn(answer=RESTARTED_ONLY)),
        VERIFIER: (Turn(answer=APPROVED),),
    },
    expected={"FM-3.2": "unverified_change"},
)
# The planner gives the same instruction three times; the fixer never acts on it.
REISSUED = TeamScenario(
    "instruction_reissued",
    {
        PLANNER: (Turn(answer=INSTRUCTION), Turn(answer=INSTRUCTION), Turn(answer=INSTRUCTION)),
        FIXER: (Turn(answer=WORKING), Turn(answer=WORKING), Turn(answer=WORKING)),
        VERIFIER: (Turn(answer=GAVE_UP),),
    },
    (PLANNER, FIXER, PLANNER, FIXER, PLANNER, FIXER, VERIFIER),
    expected={"FM-2.5": "instruction_reissued", "FM-3.1": "no_tool_call"},
)
QUOTA = "admission webhook denied the request: memory limit 512Mi exceeds the namespace quota"
# The fixer's change fails; its report, all the verifier is handed, leaves the failure out.
DROPPED_ERROR = _scenario(
    "handoff_drops_error",
    {
        PLANNER: (Turn(answer=INSTRUCTION),),
        FIXER: (
            Turn((logs(),)),
            Turn((apply(),)),
            Turn(answer="Raised checkout's limit to 512Mi."),
        ),
        VERIFIER: (Turn(answer=APPROVED),),
    },
    # The verifier approves what the logs still show failing, and the run ends on the failure.
    expected={
        "FM-2.4": "error_not_passed_on",
        "FM-3.1": "after_failed_call",
        "FM-3.3": "claimed_despite_unhealthy",
    },
    failing=("apply_manifest", QUOTA),
    handed_on=True,
)
TEAM_SCENARIOS = (CLEAN, RUBBER_STAMP, REISSUED, DROPPED_ERROR)
