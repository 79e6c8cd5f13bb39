#!/usr/bin/env bash
# System packages the tests need (Debian). Idempotent; each entry: a command and its package.
set -euo pipefail
need=()
# command:package pairs; add a line per tool the tests use.
for pair in promtool:prometheus; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair##*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing system packages: ${need[*]} (install them as root: apt-get install ${need[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
