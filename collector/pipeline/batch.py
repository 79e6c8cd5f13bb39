"""What the pipeline's queue carries from admission to the stages, and the clocks the pipeline
reads time on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mast_otel.collector.spool import SpoolEntry

# Seconds, monotonic: idle times, ticks and due writes are read on it.
Clock = Callable[[], float]
# Nanoseconds since the epoch: spans' times are compared with it (clock skew).
WallClock = Callable[[], int]


@dataclass(slots=True)
class Batch:
    """On its way from admission to the stages: one request's records (`kind` "spans" or
    "logs"), findings made off the pipeline's thread ("findings"), or one callable to run on
    that thread in turn ("call")."""

    kind: str
    items: list[Any]
    entry: SpoolEntry | None = None
    # Replayed from the spool: its rows may already be stored.
    replayed: bool = False
    # Replayed, and the journal says its rows are stored: feed the windows only.
    stored: bool = False
    # Request bytes it holds in the queue.
    size: int = 0
    # Whether its records' values must be scanned for secrets (see `Redactor.needs_scan`).
    scan: bool = True
    # When its request arrived, on the pipeline's clock (a request replayed by a worker).
    now: float | None = None
