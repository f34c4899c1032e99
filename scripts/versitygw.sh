#!/usr/bin/env bash
# The S3-compatible server of the object-storage tests: versitygw (Apache-2.0, Go), built once with
# `go install` into ~/.cache/segaudit/bin (SEGAUDIT_CACHE moves it), outside the repository. Idempotent:
# silent when the binary is there. tests/s3_server.py starts it; without it the S3 tests skip with
# "versitygw unavailable", which .ci/run turns into a failure.
set -euo pipefail
VERSION=v1.8.0
bin="${SEGAUDIT_CACHE:-$HOME/.cache/segaudit}/bin"
[ -x "$bin/versitygw" ] && exit 0
command -v go >/dev/null 2>&1 || {
  echo "segaudit tests: Go is required to build versitygw (the S3 server of the object-storage tests)." \
       "On Debian: sudo apt-get install -y golang (or deselect them: -m 'not s3')" >&2
  exit 2
}
echo "segaudit tests: building versitygw $VERSION into $bin (once, about 3 minutes)" >&2
mkdir -p "$bin"
# go install writes the binary whole when the build succeeded; a failed build leaves none.
GOBIN="$bin" go install "github.com/versity/versitygw/cmd/versitygw@$VERSION"
