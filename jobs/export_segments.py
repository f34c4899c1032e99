"""spark-submit entry point of the export: the same options as `segaudit export`.

    spark-submit --master spark://host:7077 jobs/export_segments.py /data/kafka-logs --out /data/audit

Calls :func:`analytics.pipeline.export`.
"""

from __future__ import annotations

import sys

from analytics import pipeline
from analytics.cli.main import guarded, parser
from analytics.cli.options import cluster_options, spark_session
from analytics.contract import EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(["export", *(sys.argv[1:] if argv is None else argv)])

    def job() -> int:
        result = pipeline.export(spark_session(args), args.logdirs, args.out, records=args.records,
                                 input_format=args.input_format, cluster=cluster_options(args))
        print(f"exported {result.files} files ({result.input_bytes:,} bytes) to {result.out}: run {result.run_id}")
        return EXIT_OK

    return guarded(job, "export", debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
