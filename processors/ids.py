"""Deterministic ids for things that have none on the wire (log-only runs, findings)."""

from __future__ import annotations

import hashlib


def stable_hex(*parts: str, length: int = 32) -> str:
    """A lowercase hex digest of `parts`, `length` characters long (at most 64)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    return digest[:length]
