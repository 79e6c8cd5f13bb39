"""CrewAI's own team scenario, beside the shared ones (team_scenarios.py): a hierarchical crew
whose manager hands the work out with CrewAI's delegation tool, the coworker working under
that tool call.

Standard library only: the agent side runs in .venv-crewai.
"""

from __future__ import annotations

from tests.frameworks.model_server import Call, Turn
from tests.frameworks.team_scenarios import (
    FIXER,
    GAVE_UP,
    INSTRUCTION,
    PLANNER,
    WORKING,
    TeamScenario,
)

# The manager's delegation, by the name crewai offers it to the model under.
DELEGATE = "delegate_work_to_coworker"
CONTEXT = "checkout in namespace shop is crash-looping."

_DELEGATION = Turn((Call(DELEGATE, {"task": INSTRUCTION, "context": CONTEXT, "coworker": FIXER}),))

# The manager (the planner) delegates the same instruction three times; the fixer answers
# each time without acting on it. The third delegation repeats the call (FM-1.3).
REDELEGATED = TeamScenario(
    "manager_redelegates",
    {PLANNER: (_DELEGATION,) * 3 + (Turn(answer=GAVE_UP),), FIXER: (Turn(answer=WORKING),) * 3},
    (),
    expected={"FM-1.3": "same_call"},
)
CREWAI_SCENARIOS = (REDELEGATED,)
