"""FM-2.2 Fail to ask for clarification: the agent acts on a guess instead of asking.

Rules, one module each:
- `ambiguous_then_mutate` (ambiguous_then_mutate.py): a change right after a result that left
  the target unclear, with no clarifying step between;
- `unnamed_target` (unnamed_target.py): a change to a resource nothing the agent was given
  names;
- `unasked_choice` (unasked_choice.py): an identifier chosen among several that tool results
  offered, which neither the user nor the instructions named and the agent never put to the
  user;
- `unmentioned_count` (unmentioned_count.py): in a conversation, a change that sets a positive
  count whose subject nobody spoke of.

A call is judged by the first of the first three rules that applies, and by the count rule
when none of them reported it. What a tool result offers and what a changed record held are
read by clarification_offers.py and clarification_records.py, which FM-1.1 shares. config.py
holds the section, context.py what the rules read, detector.py the detector and the per-run
state that hands each step to the rules.
"""
