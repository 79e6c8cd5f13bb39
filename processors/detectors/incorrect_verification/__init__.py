"""FM-3.3 Incorrect verification: the agent checked, and the check does not support what it
concluded.

The detector (detector.py) follows each run's changes and the reads after them in a ledger
(verification.py), or reads FM-3.2's when FM-3.2 lends it; its settings are in config.py, what
its rules read in context.py. The rules:

- `claimed_despite_unhealthy` (success_claim.py): success declared while the last check shows
  the resource unhealthy;
- `checked_too_early` (success_claim.py): that unhealthy check came before the change could
  take effect;
- `wrong_target` (success_claim.py): success declared after checking only other resources
  than the one changed;
- `success_after_failed_change` (conclusions.py): a change failed and the model told the user
  it succeeded;
- `identity_mismatch` (conclusions.py): a record whose identifier (an email) is not the one
  the user gave, taken for the user's;
- `change_on_past_record` (conclusions.py): a change on a record whose dated items all lie
  before the current date the run's instructions give;
- `rejected_figure` (figures.py): a change rejected with the system's figure against one the
  agent had stated or computed;
- `amount_does_not_cover` (figures.py): an amount said to cover a larger one;
- `window_claim_contradicts_record` (window_claim_contradicts_record.py): a record said to be
  within an N-hour or N-day window its own date, read by id, says it has left;
- `past_error_misread` (past_error_misread.py): an error about a date already past told to the
  user as another reason (unavailable);
- `unavailable_option_offered` (unavailable_option_offered.py): an item offered at the price
  of a class its own read showed none left of;
- `user_word_over_record` (user_word_over_record.py): the user's description of a field
  ("as a Gold member") given as a reason though the record read gives another value;
- `refusal_against_permission` (refusal_against_permission.py): an action refused that the
  run's instructions grant without condition.
"""
