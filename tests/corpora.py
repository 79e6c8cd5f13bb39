"""The real corpora the tests and figures rest on, shipped compressed in `tests/data/`.

- `tests/data/tau-bench/gpt-4o-airline.json.gz`: tau-bench's 200 GPT-4o airline runs
  (sierra-research/tau-bench, commit 59a200c6, `historical_trajectories/`, MIT licence beside
  it);
- `tests/data/who-and-when/who-and-when.tar.gz`: the Who&When benchmark's even-numbered logs
  (ag2ai/Agents_Failure_Attribution, commit f4d2b6da, `Who&When/`, MIT licence beside it).

Each is unpacked once into `.corpora/` at the top of the checkout (ignored by git) and read
from there, so a fresh clone needs nothing outside the repository.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
UNPACKED = ROOT / ".corpora"
TAU_ARCHIVE = DATA / "tau-bench" / "gpt-4o-airline.json.gz"
WHO_AND_WHEN_ARCHIVE = DATA / "who-and-when" / "who-and-when.tar.gz"


def tau_file() -> Path:
    """tau-bench's airline runs as a JSON file."""
    target = UNPACKED / "tau-bench" / "gpt-4o-airline.json"
    if not _fresh(target, TAU_ARCHIVE):
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        with gzip.open(TAU_ARCHIVE, "rb") as source, partial.open("wb") as handle:
            shutil.copyfileobj(source, handle)
        os.replace(partial, target)
    return target


def who_and_when_dir() -> Path:
    """The Who&When folder (`Algorithm-Generated/`, `Hand-Crafted/`)."""
    target = UNPACKED / "who-and-when"
    marker = UNPACKED / "who-and-when.unpacked"
    if not _fresh(marker, WHO_AND_WHEN_ARCHIVE):
        UNPACKED.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=UNPACKED))
        with tarfile.open(WHO_AND_WHEN_ARCHIVE, "r:gz") as archive:
            archive.extractall(staging, filter="data")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging / "who-and-when", target)
        shutil.rmtree(staging, ignore_errors=True)
        marker.write_text("ok\n")
    return target


def _fresh(target: Path, archive: Path) -> bool:
    return target.is_file() and target.stat().st_mtime >= archive.stat().st_mtime
