"""spark-submit entry point of the main job: `segaudit run`, with its options and output.

    spark-submit --master spark://host:7077 jobs/run.py /shared/kafka-logs --out /shared/audit/broker-1

Export, audit, validation and report in one Spark application: :func:`analytics.cli.commands.run`
(through :func:`jobs.submit`) calls :func:`analytics.pipeline.run` with every option, on the
submitted session. Prints what `segaudit run` prints (``--format json``: its JSON document); exit
code 1 when an expectation fails, 2 on bad input, 130/143 when interrupted.
"""

from __future__ import annotations

import sys

from jobs import submit


def main(argv: list[str] | None = None) -> int:
    return submit("run", argv)


if __name__ == "__main__":
    sys.exit(main())
