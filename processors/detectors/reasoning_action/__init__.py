"""FM-2.6 reasoning-action mismatch: what the model says and what the agent does disagree.

It compares the model's words with the calls around them (the call asked for and the one run,
the change made and the one announced), and the figures and facts it tells with what the run's
results, messages and instructions hold. Each rule, by its module:

- `other_tool_executed`, `verb_mismatch`, `target_mismatch`, `announced_then_stopped`:
  compare.py;
- `claims_done_then_acts`: claims_done_then_acts.py;
- `unsupported_observation`: unsupported_observation.py (its terms: observations.py);
- `unsupported_value`, `unsupported_operand`: amounts.py;
- `claimed_unperformed_action`: claims.py;
- `report_contradicts_result`: report.py;
- `report_contradicts_change`: fields.py;
- `call_differs_from_announced`: promise.py;
- `group_told_as_member`: groups.py;
- `inability_then_done`: inability.py;
- `refund_told_as_charge`: sign.py;
- `told_other_than_calculated`: calculation.py;
- `told_other_than_error_figure`: error.py.

config.py holds the settings (`detectors.reasoning_action`), context.py what the rules read
(the settings' patterns compiled once per detector), detector.py the detector and its per-run
state, which hands each step to the rules in order and bounds the findings of a run."""
