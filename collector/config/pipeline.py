"""`pipeline`: the queue between receivers and the worker that normalizes, windows and
detects."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PipelineConfig:
    """The queue between receivers and the one worker that normalizes, windows and detects."""

    # Spans and log records decoded but not yet processed. Past this, receivers refuse with
    # OTLP's retryable status so senders back off instead of losing data.
    # Each queued span costs about 7 KB of memory once decoded.
    queue_max_items: int = 50_000
    # Request bytes (as received, decompressed) waiting in the queue: bounds memory when
    # spans are large, which the item count alone does not.
    queue_max_bytes: int = 64 * 1024 * 1024
    # How long a refused sender is told to wait before retrying.
    retry_after_s: float = 1.0
    # How often the pipeline releases steps past their grace period and closes idle runs.
    tick_interval_s: float = 0.2
    # Longest text kept per step field (tool arguments/results, model output) for detection.
    max_step_text: int = 16 * 1024
    # Allocations between two young-generation garbage collections in `serve` (Python's
    # default is 700; 0 keeps it). Each span allocates hundreds of short-lived objects: at
    # 700, collections took 11% of the pipeline's CPU on the benchmark fleet, at 50,000 2%.
    gc_gen0_threshold: int = 50_000
