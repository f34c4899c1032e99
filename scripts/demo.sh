#!/usr/bin/env bash
# The main job on the bundled sample: install into .venv, then read data/mixed and report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/segaudit inspect data/mixed "$@"
