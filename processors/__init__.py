"""What turns spans into diagnoses: normalization, per-run windows, detectors, scoring.

Everything in this package is pure logic: no sockets, no files, no clocks of its own
(time is passed in), so it is tested on plain objects.
"""
