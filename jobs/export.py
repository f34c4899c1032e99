"""spark-submit entry point of the export: `segaudit export`, with its options and output.

    spark-submit --master spark://host:7077 jobs/export.py /data/kafka-logs --out /data/audit

:func:`analytics.cli.commands.export` (through :func:`jobs.submit`) calls
:func:`analytics.pipeline.export` with every option (``--incremental``, a live cluster's...), on
the submitted session: under spark-submit the input is read in Spark's executors, whatever its
size. Prints what `segaudit export` prints: rows per table and the run published; exit code 2 on
bad input, 130/143 when interrupted.
"""

from __future__ import annotations

import sys

from jobs import submit


def main(argv: list[str] | None = None) -> int:
    return submit("export", argv)


if __name__ == "__main__":
    sys.exit(main())
