#!/usr/bin/env bash
# Creates .venv with mast-otel, its test tools and the agent frameworks the tests run;
# OpenLLMetry (traceloop-sdk) pins an older OpenTelemetry SDK, so its agent side gets
# .venv-traceloop. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test,frameworks]'
python3 -m venv .venv-traceloop
.venv-traceloop/bin/python -m pip install --quiet --upgrade pip
.venv-traceloop/bin/python -m pip install --quiet -r scripts/traceloop-requirements.txt
