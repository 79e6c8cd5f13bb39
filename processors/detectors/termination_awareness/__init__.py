"""FM-1.5 Unaware of termination conditions: the agent does not know when to stop.

Rules:
- `limit_hit` (limits.py): the run (or one of its agents) ended on a turn, step or time limit;
- `past_budget` (limits.py): the run went on `steps_past_budget` steps beyond its step budget
  (`mast.task.max_steps`) instead of stopping at it;
- `calls_after_final_answer` (calls_after_final_answer.py): an agent gave its final answer and
  then kept calling tools itself (in a team's run: any agent, after the team's last word);
- `calls_after_success` (calls_after_success.py): a check after a change already showed the
  resource healthy, and the agent made `calls_after_success` more tool calls regardless;
- `ended_in_loop` (ending.py): the run's last `final_loop_length` tool calls were one call
  repeated with the same result;
- `ended_mid_work` (ending.py): the run's last step is a tool call with no answer after it,
  after at least `ended_mid_work_min_calls` tool calls: cut off while still working.

Each rule is reported at most once per run.
"""
