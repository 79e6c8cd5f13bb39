#!/usr/bin/env bash
# Creates .venv with mast-otel and its test tools installed. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
