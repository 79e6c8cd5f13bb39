"""FM-1.1 Disobey task specification: the run does what its task forbids.

Rules, against the task's policy (the run's `mast.task.*` attributes, else the configured
defaults) and its instructions (`mast.task.description`), with the module that decides each:
- `tool_not_allowed` (task_policy.py): a tool call outside `mast.task.allowed_tools`;
- `mutation_in_read_only_task` (task_policy.py): a mutating call in a read-only task;
- `step_budget` / `time_budget` / `token_budget` (budgets.py): the run passes its budget of
  steps, seconds or tokens;
- `change_without_confirmation` (change_without_confirmation.py): a change the user did not
  confirm, where the instructions require explicit confirmation;
- `change_with_unlisted_detail` (change_with_unlisted_detail.py): a change the user confirmed
  that carries an identifier no turn named;
- `escalation_after_refusal` / `escalation_offered_after_refusal` (escalation.py): an
  escalation to a person, made or offered, after the agent's own refusal, where the
  instructions allow escalating only what cannot be handled;
- `offer_before_request` (offer_before_request.py): an offer (compensation, a voucher) before
  the user asked for one, where the instructions forbid offering it unprompted;
- `change_before_prerequisites` (change_before_prerequisites.py): a change made before the
  agent obtained what the instructions say to obtain first;
- `change_to_past_resource` (change_to_past_resource.py): a change to a resource whose
  scheduled dates all lie before the current time the instructions state;
- `change_outside_window` (change_outside_window.py): a change the instructions allow only
  within a time of the resource's creation, made later, with none of their exceptions;
- `change_after_own_refusal` (change_after_own_refusal.py): a change the agent itself had told
  the user the resource does not allow.

Policy attributes and instructions usually sit on the root span, which arrives last; calls are
therefore checked as they come against what is known, and again at close against the whole
policy, and the rules that need the instructions hold what they find until then. config.py
holds the section and its default patterns, context.py what the rules read, detector.py the
detector and the per-run state that hands each step to the rules.
"""
