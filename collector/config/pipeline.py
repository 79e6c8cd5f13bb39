"""`pipeline`: the queue between receivers and the worker that normalizes, windows and
detects."""

from __future__ import annotations

from dataclasses import dataclass

from mast_otel.collector.config.cores import available_cores


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
    # Worker processes that decode, window and detect (runs sharded by trace id, each run in
    # one worker); the receiving process routes, spools and stores. 0 (the default) starts one
    # per core this process may use (its CPU affinity and its cgroup's CPU quota, so a
    # container limited to 2 CPUs starts 2); 1 keeps everything in one process.
    workers: int = 0
    # Requests handed to a worker and not yet taken by it: past this, for any worker,
    # receivers refuse with OTLP's retryable status.
    worker_queue_max_requests: int = 16
    # The same bound in request bytes (held by the receiving process until the worker takes
    # them).
    worker_queue_max_bytes: int = 32 * 1024 * 1024
    # A worker that dies more often than this within `worker_restart_window_s` is not started
    # again (its runs' requests are refused, retryably, until the collector is restarted).
    worker_max_restarts: int = 5
    # The window, in seconds, over which a worker's deaths are counted.
    worker_restart_window_s: float = 60.0
    # How long a stop waits for the workers to drain before terminating them.
    worker_stop_timeout_s: float = 60.0
    # How long a stop lets each worker process what it was given (with `workers` > 1; one
    # process processes its whole queue). What is left then (requests
    # not processed, and every run still open) stays in the spool, the stop's last line says
    # how much, and the next start processes it; the runs are analysed whole then.
    stop_drain_s: float = 8.0

    def worker_count(self) -> int:
        """`workers`, with 0 read as the cores this process may use."""
        return self.workers or available_cores()
