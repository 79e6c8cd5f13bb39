"""The default number of workers: the cores this process may use, not the machine's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mast_otel.collector.config import load_config
from mast_otel.collector.config.cores import available_cores, cgroup_quota


def test_cgroup_v2_quota_rounds_up_to_whole_cores(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cgroup_quota(tmp_path) == 2
    (tmp_path / "cpu.max").write_text("200000 100000\n")
    assert cgroup_quota(tmp_path) == 2
    (tmp_path / "cpu.max").write_text("50000 100000\n")
    assert cgroup_quota(tmp_path) == 1


def test_cgroup_v2_without_a_limit(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_quota(tmp_path) is None


def test_cgroup_v1_quota_and_its_no_limit(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("300000\n")
    assert cgroup_quota(tmp_path) == 3
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_quota(tmp_path) is None


def test_no_cgroup_files_or_garbage_in_them(tmp_path: Path) -> None:
    assert cgroup_quota(tmp_path) is None
    (tmp_path / "cpu.max").write_text("lots of cores\n")
    assert cgroup_quota(tmp_path) is None


def test_the_quota_caps_the_affinity_mask(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("100000 100000\n")
    assert available_cores(tmp_path) == 1
    # Without a quota: the cores the affinity mask allows.
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    assert available_cores(tmp_path / "absent") == (expected or os.cpu_count() or 1)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no affinity on this platform")
def test_affinity_limits_the_default_worker_count() -> None:
    allowed = os.sched_getaffinity(0)
    config = load_config()
    assert config.pipeline.workers == 0
    try:
        os.sched_setaffinity(0, {min(allowed)})
        assert config.pipeline.worker_count() == 1
    finally:
        os.sched_setaffinity(0, allowed)
    assert config.pipeline.worker_count() == available_cores()
    config.pipeline.workers = 3
    assert config.pipeline.worker_count() == 3
