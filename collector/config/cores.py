"""How many cores this process may use: the default number of worker processes.

`os.cpu_count()` counts the machine's cores, not the ones a container or a CPU affinity mask
leaves to this process: a collector in a pod limited to two CPUs on a 64-core node would start
64 workers that contend for two cores. This reads, and takes the smallest of:
- the affinity mask (`os.sched_getaffinity`, where the platform has it);
- the cgroup's CPU quota: v2 `cpu.max` ("max 100000" or "200000 100000"), else v1
  `cpu.cfs_quota_us` / `cpu.cfs_period_us`, rounded up to whole cores.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def available_cores(cgroup_root: Path = CGROUP_ROOT) -> int:
    """The cores this process may run on, at least 1."""
    cores = _affinity() or os.cpu_count() or 1
    quota = cgroup_quota(cgroup_root)
    if quota is not None:
        cores = min(cores, quota)
    return max(1, cores)


def cgroup_quota(cgroup_root: Path = CGROUP_ROOT) -> int | None:
    """The cgroup's CPU limit in whole cores (rounded up), or None where there is none."""
    v2 = _read(cgroup_root / "cpu.max")
    if v2 is not None:
        parts = v2.split()
        if len(parts) == 2 and parts[0] != "max":
            return _cores(parts[0], parts[1])
        return None
    quota = _read(cgroup_root / "cpu" / "cpu.cfs_quota_us") or _read(
        cgroup_root / "cpu.cfs_quota_us"
    )
    period = _read(cgroup_root / "cpu" / "cpu.cfs_period_us") or _read(
        cgroup_root / "cpu.cfs_period_us"
    )
    if quota is None or period is None:
        return None
    return _cores(quota, period)


def _cores(quota: str, period: str) -> int | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    if q <= 0 or p <= 0:  # v1 writes -1 for "no limit"
        return None
    return max(1, math.ceil(q / p))


def _affinity() -> int | None:
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is None:
        return None
    try:
        return len(getaffinity(0)) or None
    except OSError:
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None
