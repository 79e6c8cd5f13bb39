#!/usr/bin/env bash
# Sets up .venv, then runs the checks and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
MYPY=.venv/bin/mypy bash scripts/typecheck.sh
.venv/bin/python -m pytest -q
