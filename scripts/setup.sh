#!/usr/bin/env bash
# Creates .venv with mast-otel, its test tools and the agent frameworks the tests run. Five
# frameworks pin an older OpenTelemetry SDK, openai client, pydantic or protobuf than the rest, so
# their agent side gets an environment of its own: .venv-traceloop (OpenLLMetry), .venv-strands
# (Strands Agents), .venv-ag2 (AG2), .venv-autogen (AutoGen AgentChat) and .venv-crewai
# (CrewAI); the collector under test always runs from .venv. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
# .dev/mast_otel/<folder> links: the checkout importable by its installed names, for the tools
# that read imports without running the package's installer (ARCHITECTURE.md).
bash scripts/dev-links.sh
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test,frameworks]'
for name in traceloop strands ag2 autogen crewai; do
    python3 -m venv ".venv-$name"
    ".venv-$name/bin/python" -m pip install --quiet --upgrade pip
    if [ "$name" = crewai ]; then
        # Its list is the whole environment, installed without the dependencies crewai
        # declares: about 1 GB its runs never import (scripts/crewai-requirements.txt).
        ".venv-$name/bin/python" -m pip install --quiet --no-deps -r "scripts/$name-requirements.txt"
    else
        ".venv-$name/bin/python" -m pip install --quiet -r "scripts/$name-requirements.txt"
    fi
done
