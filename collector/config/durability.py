"""`durability`: when a request is acknowledged, and the write-ahead spool that keeps what
was acknowledged across a killed process."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class DurabilityConfig:
    """When a request is acknowledged, and what survives a killed process (the spool)."""

    # durable: a request is acknowledged only once it is in the write-ahead spool on disk, so
    # a killed process loses nothing it acknowledged; memory: acknowledged once queued in
    # memory (a killed process loses what it had not stored yet).
    mode: str = "durable"
    # Where the spool lives; empty means "<storage.data_dir>/spool".
    spool_dir: str = ""
    # Spool bytes on disk. Past this, receivers refuse with OTLP's retryable status.
    max_spool_bytes: int = 1024 * 1024 * 1024
    # A spool file is closed and a new one started past this size; a closed file is deleted
    # once everything it holds is stored and every run it touched is closed and stored.
    segment_bytes: int = 64 * 1024 * 1024
    # group: each request is acknowledged after the fsync that covers it (survives a power
    # cut); requests written while an fsync runs share the next one, so fsyncs per request
    # fall as load rises. none: acknowledged once written to the operating system (survives
    # a killed process, not a power cut).
    fsync: str = "group"
    # Extra wait before each fsync to gather more requests into it (0: none; the natural
    # grouping above already batches under load).
    group_commit_ms: float = 0.0
    # Past this share of max_spool_bytes, the runs holding the oldest spool file open are
    # closed and analysed (counted as runs_closed.spool_full), so long runs cannot pin the
    # spool until it refuses everything.
    run_eviction_ratio: float = 0.75
    # At a clean stop: false closes and analyses every open run (close reason "shutdown");
    # true leaves runs still in progress in the spool and the next start resumes them, so a
    # restart does not cut them in two.
    resume_open_runs: bool = False
