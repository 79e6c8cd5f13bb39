"""FM-1.3 Step repetition: the agent repeats a step that already told it what it would tell.

Rules, one module each:
- `same_call` (same_call.py): the same call with equivalent arguments and the same result,
  again and again, close together;
- `near_duplicate_retry` (near_duplicate_retry.py): a failing call retried with small changes
  to its arguments and the same failure each time;
- `cycle` (cycle.py): a short cycle of calls (A,B,A,B,...) come round unchanged;
- `repeated_request` (repeated_request.py): the agent asks the user for the same identifier
  turn after turn, never trying another way, until the run ends.

One finding per streak or cycle, at the call that completes it. Usually benign on its own (the
study sees it in successful runs too); its cost (time, calls, tokens of the stretch) says how
much it wasted. config.py holds the section, context.py what the rules read, detector.py the
detector and the per-run state that hands each step to the rules.
"""
