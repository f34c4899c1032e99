#!/usr/bin/env bash
# Install segaudit with its test dependencies into .venv, then run the test suite with pytest.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# The real-broker tests start Apache Kafka from its jars on Maven Central, resolved with Maven.
case " $* " in
  *"not broker"*) ;;
  *) command -v mvn >/dev/null 2>&1 || {
       echo "segaudit tests: Maven (mvn) is required to resolve Apache Kafka's jars for the real-broker tests." \
            "On Debian: sudo apt-get install -y maven (or deselect them: -m 'not broker')" >&2
       exit 2
     } ;;
esac
# The object-storage tests serve S3 with versitygw, built once with Go into ~/.cache/segaudit/bin; the
# Trino test opens OUT's tables there with Trino's Delta Lake connector: trino-server from Maven Central,
# fetched once into ~/.cache/segaudit/trino (it runs on a JDK 24+, which the test looks for).
case " $* " in
  *"not s3"*) ;;
  *) bash scripts/versitygw.sh; bash scripts/trino.sh ;;
esac
exec .venv/bin/python -m pytest "$@"
