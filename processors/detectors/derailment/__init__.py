"""FM-2.3 Task derailment: the agent drifts to work unrelated to its task.

Rules:
- `off_task` (detector.py: the detector's whole logic is this one rule, so it stays with the
  detector): `min_off_task_steps` tool calls in a row act on resources that share nothing with
  the task or with the evidence gathered on task so far.
"""
