"""The offline pipeline's CPU per corpus: every run of tau-bench's 200 airline runs (with their
tool definitions) and of the Who&When team logs, imported, normalized, windowed and analysed by
every detector (`run_files`, the path `mast-otel analyze` takes), to an in-memory exporter.

Prints, per corpus, the best and the median of N passes in CPU seconds of this process (steadier
than wall time on a shared machine), spans, findings and signatures. It imports `mast_otel` from
wherever the interpreter finds it, so two trees compare by running it with each one's links
first on the path, alternated, in one session:

    PYTHONPATH=/path/to/other-tree/.dev .venv/bin/python scripts/bench_offline.py --passes 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[1:1] = [str(ROOT), str(ROOT / "scripts")]

import real_accuracy  # noqa: E402

import mast_otel.processors  # noqa: E402
from mast_otel.collector.analyze import run_files  # noqa: E402
from mast_otel.collector.config import load_config  # noqa: E402
from mast_otel.collector.store.exporter import MemoryExporter  # noqa: E402
from tests.corpora import tau_file, who_and_when_dir  # noqa: E402


def corpora(folder: Path) -> dict[str, list[str]]:
    tools = real_accuracy._with_tools(tau_file(), real_accuracy.TOOLS, folder)
    team = sorted(str(p) for p in who_and_when_dir().rglob("*.json") if p.stem.isdigit())
    return {"tau-bench airline (200 runs)": [tools], f"who-and-when ({len(team)} runs)": team}


def one_pass(paths: list[str]) -> tuple[float, MemoryExporter]:
    exporter = MemoryExporter()
    config = load_config(None)
    start = time.process_time()
    run_files(config, paths, exporter)
    return time.process_time() - start, exporter


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"mast_otel from {Path(mast_otel.processors.__file__).resolve().parent.parent}")
    with tempfile.TemporaryDirectory() as folder:
        for name, paths in corpora(Path(folder)).items():
            times = []
            for _ in range(args.passes):
                seconds, exporter = one_pass(paths)
                times.append(seconds)
            print(
                f"{name}: best {min(times):.2f} s, median {statistics.median(times):.2f} s CPU"
                f" over {args.passes} passes; {len(exporter.spans)} spans,"
                f" {len(exporter.findings)} findings, {len(exporter.signatures)} signatures"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
