"""FM-2.4 Information withholding: an agent keeps to itself what the next agent, or the user,
needed.

Rules, around each hand-off from one agent to another (handoffs.py: both read what each agent
knew when it handed off):
- `redone_after_handoff`: the receiving agent makes a read-only call the sender had already
  made successfully before handing off: the sender had the result and did not pass it on;
- `error_not_passed_on`: the sender saw a tool call fail, and the hand-off message mentions
  neither the failure nor the failing tool.

And towards the user:
- `unpriced_consent` (unpriced_consent.py): a yes asked for a change that names a means of
  payment, with no amount told.
"""
