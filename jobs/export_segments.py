"""spark-submit entry point of the export: the same options as `segaudit export`.

    spark-submit --master spark://host:7077 jobs/export_segments.py /data/kafka-logs --out /data/audit
"""

from __future__ import annotations

import sys

from analytics.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    return cli_main(["export", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
