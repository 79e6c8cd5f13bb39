#!/usr/bin/env bash
# mypy over the product's code, read as the package it installs as (mast_otel.*) through the
# .dev links (pyproject.toml sets mypy_path).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/dev-links.sh
"${MYPY:-.venv/bin/mypy}" \
    -p mast_otel.collector -p mast_otel.processors -p mast_otel.schemas -p mast_otel.dashboards "$@"
