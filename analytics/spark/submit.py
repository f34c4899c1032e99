"""The ``spark-submit`` arguments of segaudit's jobs, printed for a command line:

    spark-submit --master spark://spark-master:7077 $(python -m analytics.spark.submit --s3) \\
      jobs/run.py s3://kafka-logs/broker-1 --out s3://audit/broker-1

- The driver's log: Spark's log4j output goes to a file of its own, ``<cache>/logs/submit-<time>.log``
  (``SEGAUDIT_CACHE``, else ``~/.cache/segaudit``), as a local command's JVM does
  (:mod:`analytics.spark.jvmlog`): the terminal keeps segaudit's own lines. One ``--conf`` of
  ``spark.driver.extraJavaOptions``, which ``spark-submit`` applies to the driver it starts in client
  mode; a user's own ``--conf`` of it after these arguments replaces it.
- segaudit's jar (the audit's replay, :mod:`analytics.spark.javacode`) in ``--jars``, built once when
  missing.
- ``--s3``: the S3 connector's jars (in the same ``--jars``) and settings for the current AWS
  environment (:func:`analytics.spark.objectstore.submit_arguments`; never a credential).

The output is split by the shell into words, so no argument holds a space (the cache's path must not).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from analytics.spark import jvmlog

LOG4J = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {folder}/submit-${{date:yyyyMMdd-HHmmss}}.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
"""


def log_configuration() -> Path:
    """The log4j2 configuration of a submitted driver (written when missing or changed)."""
    folder = jvmlog.folder()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "submit-log4j2.properties"
    text = LOG4J.format(folder=folder)
    if not target.is_file() or target.read_text() != text:
        fd, temporary = tempfile.mkstemp(prefix=".submit-log4j2.", dir=folder)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(temporary, target)
    return target


def arguments(s3: bool = False) -> list[str]:
    """The arguments (see the module docstring)."""
    from analytics.spark import javacode

    args = ["--conf", f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile={log_configuration()}"]
    jars = javacode.submit_jars()
    if s3:
        from analytics.spark.objectstore import submit_arguments

        connector = submit_arguments()
        at = connector.index("--jars")
        jars += connector[at + 1].split(",")
        args += connector[:at] + connector[at + 2:]
    if jars:  # one --jars: spark-submit keeps the last of several
        args += ["--jars", ",".join(jars)]
    if any(" " in a for a in args):
        raise SystemExit(f"segaudit: a path has a space, which a shell splits: {' '.join(args)}")
    return args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analytics.spark.submit", description=__doc__.splitlines()[0])
    parser.add_argument("--s3", action="store_true", help="add the S3 connector (jars and settings)")
    options = parser.parse_args(argv)
    from analytics.errors import SegauditError

    try:
        print(" ".join(arguments(options.s3)))
    except SegauditError as e:
        print(f"segaudit: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
