"""Replay the scenario corpus through the collector and print per-mode precision and recall.

.venv/bin/python scripts/accuracy.py [--transport grpc|http] [--dialect NAME ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mast_otel.collector.demo.dialects import DIALECTS
from tests.accuracy import replay, report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--dialect", action="append", choices=list(DIALECTS))
    args = parser.parse_args()
    results = replay(dialects=args.dialect or DIALECTS, transport=args.transport)
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
