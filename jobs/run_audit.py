"""spark-submit entry point of the main job: the same options as `segaudit run`.

    spark-submit --master spark://host:7077 jobs/run_audit.py /shared/kafka-logs --out /shared/audit/broker-1

Export, audit and validation in one Spark application; exit code 1 when an expectation fails.
"""

from __future__ import annotations

import sys

from analytics.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    return cli_main(["run", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
