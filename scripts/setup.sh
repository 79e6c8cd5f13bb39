#!/usr/bin/env bash
# Creates .venv with mast-otel, its test tools and the agent frameworks the tests run. Three
# frameworks pin an older OpenTelemetry SDK or openai client than the rest, so their agent
# side gets an environment of its own: .venv-traceloop (OpenLLMetry), .venv-strands (Strands
# Agents) and .venv-ag2 (AG2); the collector under test always runs from .venv. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test,frameworks]'
for name in traceloop strands ag2; do
    python3 -m venv ".venv-$name"
    ".venv-$name/bin/python" -m pip install --quiet --upgrade pip
    ".venv-$name/bin/python" -m pip install --quiet -r "scripts/$name-requirements.txt"
done
