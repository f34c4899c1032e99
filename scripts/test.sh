#!/usr/bin/env bash
# Install segaudit with its test dependencies into .venv, then run the test suite with pytest.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
exec .venv/bin/python -m pytest "$@"
