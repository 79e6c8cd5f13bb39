"""FM-3.1 Premature termination: the run stops before the task is done.

Rules decided when the run closes, on how it ended (ending.py; at most one of them, the first
that applies in this order):
- `empty_answer`: the run ended on a model response with neither text nor a tool call;
- `after_failed_call`: the run's last tool call failed and nothing after it recovered;
- `announced_only`: the run ended on a bare announcement of what the agent would do next;
- `no_tool_call`: the run ended after answers without a single tool call;
- `parked_on_user`: the run changed nothing and its final answer leaves the request waiting
  until the user comes back with something;
- `pending_steps`: the final answer itself says work remains;
- `no_deliverable`: the task requires a deliverable and the final answer does not contain it.

Also decided when the run closes:
- `reprompted` (reprompted.py): the agent gave an empty answer and went on only because a
  user turn that only re-prompts asked again.

Decided as the run goes:
- `refused_what_tools_return` (refused_what_tools_return.py): the agent told the user it
  cannot look up or give a thing, and a later successful call returned it.
"""
