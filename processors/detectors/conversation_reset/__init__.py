"""FM-2.1 Conversation reset: an agent's conversation starts over from the beginning.

Rules:
- `back_to_opening` (back_to_opening.py): after an agent's context has grown, one of its model
  calls goes back to the size of its very first call: the history fell back to the initial
  prompt.

FM-1.4 (history_loss) asks this rule, with this family's settings, before it reports a shrink,
so that the two modes never overlap.
"""
