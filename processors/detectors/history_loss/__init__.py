"""FM-1.4 Loss of conversation history: the agent loses what it had already learnt.

Rules:
- `context_shrink` (context_shrink.py): between two model calls of the same agent, the input
  it sends shrinks by more than `shrink_ratio`, with no summarizing step in between and not all
  the way back to its first call (that is FM-2.1);
- `reacquire` (reacquire.py): a read-only call identical to a successful one made at least
  `reacquire_min_gap_steps` tool calls earlier returns the same result, with nothing it names
  changed in between: the agent fetched again what it already had.
"""
