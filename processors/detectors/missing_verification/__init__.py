"""FM-3.2 No or incomplete verification: the agent changed the system and never looked, or acted
on facts it never read.

The detector (detector.py) follows each run's changes and the reads after them in a ledger
(verification.py), which it lends to FM-3.3; its settings are in config.py, what its rules read
in context.py. The rules, decided when the run closes:

- `unverified_change` (changes.py): a successful change no read of the changed resource (or
  check of the system) followed before the run ended;
- `unchecked_record` (changes.py): a change on a record id no earlier tool result showed;
- `verdict_without_read` (verdict_without_read.py): a verdict on the user's own case ("you are
  eligible") before any read at all;
- `unchecked_figure` (unchecked_figure.py): a change carried a figure only the user gave and
  was rejected with the system's;
- `superlative_over_partial_search` (superlative_over_partial_search.py): an option called the
  cheapest (fastest, ...) after only some of the tools that take the query ran it.
"""
