"""spark-submit entry point of the main job: the same options as `segaudit run`.

    spark-submit --master spark://host:7077 jobs/run_audit.py /shared/kafka-logs --out /shared/audit/broker-1

Export, audit, validation and report in one Spark application (:func:`analytics.pipeline.run`);
exit code 1 when an expectation fails, 2 on bad input, 130/143 when interrupted.
"""

from __future__ import annotations

import sys

from analytics import pipeline
from analytics.cli.main import guarded, parser
from analytics.cli.options import (
    audit_config,
    cluster_options,
    history_options,
    spark_session,
    validation_config,
)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(["run", *(sys.argv[1:] if argv is None else argv)])

    def job() -> int:
        result = pipeline.run(spark_session(args), args.logdirs, args.out, audit_config(args), validation_config(args),
                              records=args.records, input_format=args.input_format, cluster=cluster_options(args),
                              **history_options(args))
        print(f"{sum(result.audited.verdicts.values())} batches, validation {'passed' if result.validated.success else 'FAILED'}; "
              f"Data Docs: {result.validated.data_docs}; report: {result.report}")
        return result.exit_code

    return guarded(job, "run", debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
