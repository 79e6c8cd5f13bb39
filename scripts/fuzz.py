#!/usr/bin/env python3
"""Longer fuzzing of the receive path than CI runs: `python scripts/fuzz.py --examples 20000`.

Each example is a generated OTLP request (tests/fuzzing.py) fed as protobuf and OTLP/JSON plus
`--mutants` damaged copies, through decoding, limits, redaction, normalization, the run
windows, the detectors and the exporter's encoding. Prints the counts; exits non-zero with the
failing example on any crash.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, given, settings

from tests.fuzzing import Harness, requests


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5_000, help="generated requests")
    parser.add_argument("--mutants", type=int, default=300, help="damaged copies of each")
    args = parser.parse_args()
    harness = Harness()

    @settings(
        max_examples=args.examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(requests())
    def fuzz(request: object) -> None:
        harness.example(request, args.mutants)  # type: ignore[arg-type]

    started = time.monotonic()
    fuzz()
    harness.flush()
    elapsed = time.monotonic() - started
    print(
        f"{harness.payloads} payloads in {elapsed:.0f} s ({harness.payloads / elapsed:,.0f}/s): "
        f"{harness.decoded} decoded into {harness.records} records, {harness.refused} refused "
        f"as malformed, 0 crashes; limits hit {dict(harness.pipeline.limits.stats)}, "
        f"redactions {dict(harness.pipeline.redactor.stats)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
