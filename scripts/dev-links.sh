#!/usr/bin/env bash
# Makes .dev/mast_otel/<folder> links to the top-level folders, so the source tree imports as
# the installed package does (`mast_otel.collector`, ...) without installing it: the type
# checker reads it from there, and `PYTHONPATH=$PWD/.dev` runs a checkout (or a second working
# tree beside an environment installed from another) as `mast_otel`. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .dev/mast_otel
for folder in collector processors schemas dashboards; do
    ln -sfn "../../$folder" ".dev/mast_otel/$folder"
done
