"""FM-2.5 Ignored other agent's input: the receiving agent does not act on what it was told.

Rules, around each hand-off (assignments.py: both read what the hand-off assigned):
- `instruction_ignored`: the hand-off message names resources to act on, and the receiver,
  having made at least `min_receiver_calls` tool calls, never touched any of them;
- `repeated_failed_action`: the hand-off message says something failed, and the receiver
  makes the very call the sender saw fail.

And in a team's conversation:
- `instruction_reissued` (instruction_reissued.py): an agent gives the same instruction
  `reissued_instruction_count` times while no teammate makes a tool call.
"""
