#!/usr/bin/env bash
# The main job on the bundled sample: install into .venv, then export, audit and validate
# data/mixed into out/mixed. The sample holds planted anomalies, so the validation finds
# violations (segaudit exits 1); this script exits 0 when the job ran to the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
out="${SEGAUDIT_DEMO_OUT:-out/mixed}"
code=0
.venv/bin/segaudit run data/mixed --out "$out" --config data/mixed.truth/audit.toml "$@" || code=$?
case "$code" in
  0) echo "every expectation met; Data Docs: $out/validation/data_docs/index.html" >&2 ;;
  1) echo "the sample's planted anomalies were found (exit 1 = expectations violated);" \
          "Data Docs: $out/validation/data_docs/index.html" >&2 ;;
  *) exit "$code" ;;
esac
