#!/usr/bin/env bash
# Install segaudit and its dependencies into .venv (idempotent: skipped when pyproject.toml is unchanged).
# Usage: bash scripts/setup.sh [extra]   e.g. "test" installs the test dependencies too.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "segaudit setup: $*" >&2; exit 2; }

python=${PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || die "Python 3.11+ is required and '$python' was not found. On Debian: sudo apt-get install -y python3 python3-venv"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "Python 3.11+ is required, found $("$python" --version 2>&1)."

# Spark runs on the JVM: Java 17 or newer must be on PATH (or under JAVA_HOME).
java=java
[ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ] && java="$JAVA_HOME/bin/java"
command -v "$java" >/dev/null 2>&1 \
  || die "Java 17+ is required (Spark runs on the JVM) and no 'java' was found. On Debian: sudo apt-get install -y openjdk-17-jdk-headless"
java_major=$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\)\(\.[0-9]*\)*.*/\1/p' | head -n1)
[ "${java_major:-0}" = 1 ] && java_major=8  # "1.8.0_x" is Java 8
[ "${java_major:-0}" -ge 17 ] 2>/dev/null \
  || die "Java 17+ is required, found: $("$java" -version 2>&1 | head -n1). On Debian: sudo apt-get install -y openjdk-17-jdk-headless"

extra=${1:-}
spec="."
[ -n "$extra" ] && spec=".[$extra]"
stamp=".venv/.installed-${extra:-base}"
constraints=""
[ "$extra" = "test" ] && constraints=scripts/test-constraints.txt  # the suite's own Spark
want=$(cat pyproject.toml $constraints analytics/audit/java/*.java | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/python ]; then
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv || die "could not create .venv. On Debian: sudo apt-get install -y python3-venv"
fi
echo "segaudit setup: installing into .venv (first run takes a minute or two) ..." >&2
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$spec" ${constraints:+-c "$constraints"} >&2
# segaudit's Java (the audit's replay, analytics/audit/java) built with the JDK's javac against this
# Spark into analytics/audit/java/segaudit.jar (a wheel carries it built); without a JDK it says so
# in one line and the audit replays with Spark's window steps, slower.
.venv/bin/python -m analytics.spark.javacode >/dev/null || true
# The S3 connector's jars for this Spark (analytics/spark/objectstore.py), fetched now and checked
# against their pinned SHA-256, so that no command needs the network later; one line if it fails.
.venv/bin/python -m analytics.spark.objectstore >/dev/null || true
echo "$want" > "$stamp"
