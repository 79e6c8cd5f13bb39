"""The shard function: which worker owns a run.

`shard_for` is the one shard function, the same in every process and every run (a keyed 64-bit
BLAKE2b of the key, modulo N): replay after a crash calls it again on the spooled bytes and gets
the same workers for the same N (a restart with another N replays every spooled request through
it again, so runs still land whole). It does not reuse the CRC32 ring of the load balancer in
front of a fleet of replicas (deploy/scale-out.md): a replica receives the trace ids of a few
arcs of that ring, and a hash correlated with it would spread them unevenly over the replica's
workers.

The run key of a log record without a trace id is the trace id the Codex normalizer gives its
conversation (`log_run_key`), so a log-only run lands where any span carrying that id lands.
"""

from __future__ import annotations

import hashlib

from mast_otel.processors.ids import stable_hex

__all__ = ["MAX_SHARDS", "SHARD_CACHE_KEYS", "log_run_key", "shard_for", "shard_for_hex"]

# More workers than this is a configuration mistake, not a machine.
MAX_SHARDS = 1024

# Keys the hash, so shard numbers are this collector's own and not any other tool's.
_PERSON = b"mast-otel/shard"


def check_n(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_SHARDS:
        raise ValueError(
            f"the number of shards must be an integer from 1 to {MAX_SHARDS}, got {n!r}"
        )


# A run's spans arrive over many requests: remembering recent keys' shards saves most hashes.
# Bounded: emptied when it reaches this many keys (per number of shards).
SHARD_CACHE_KEYS = 65_536
_shard_cache: dict[int, dict[bytes, int]] = {}


def shard_of(key: bytes, n: int) -> int:
    digest = hashlib.blake2b(key, digest_size=8, person=_PERSON).digest()
    return int.from_bytes(digest, "little") % n


def cache_for(n: int) -> dict[bytes, int]:
    cache = _shard_cache.get(n)
    if cache is None or len(cache) >= SHARD_CACHE_KEYS:
        cache = _shard_cache[n] = {}
    return cache


def shard_for(key: bytes, n: int) -> int:
    """The shard (0 ≤ shard < n) of a run key: a span's raw trace id, or `log_run_key` of a log
    record. The same in every process, run and machine."""
    check_n(n)
    return shard_of(key, n) if n > 1 else 0


def shard_for_hex(trace_id: str, n: int) -> int:
    """`shard_for` of a trace id written in hex, as records and steps carry it."""
    try:
        key = bytes.fromhex(trace_id)
    except ValueError as exc:
        raise ValueError(f"trace id {trace_id[:40]!r} is not hex") from exc
    return shard_for(key, n)


_conversation_keys: dict[str, bytes] = {}


def log_run_key(trace_id: bytes, conversation: str) -> bytes:
    """The run key of a log record: its trace id if it has a valid one, else the trace id the
    Codex normalizer gives the conversation's run."""
    if len(trace_id) == 16:
        return trace_id
    key = _conversation_keys.get(conversation)
    if key is None:
        if len(_conversation_keys) >= SHARD_CACHE_KEYS:
            _conversation_keys.clear()
        key = _conversation_keys[conversation] = bytes.fromhex(
            stable_hex("codex", conversation, length=32)
        )
    return key
