"""Benchmarks: scripts that print figures (throughput, latency, memory), run by hand, not by
the test suite. See RESULTS.md for the latest figures and how they were measured."""
