"""spark-submit entry point of the validation: the same options as `segaudit validate`.

    spark-submit --master spark://host:7077 jobs/validate_expectations.py /shared/audit/broker-1 --config audit.toml

Calls :func:`analytics.pipeline.validate`. Exit code 1 when an expectation fails, so a scheduler
sees the violation.
"""

from __future__ import annotations

import sys

from analytics import pipeline
from analytics.cli.main import guarded, parser
from analytics.cli.options import spark_session, validation_config
from analytics.cli.render import checks_table, passed
from analytics.contract import EXIT_OK, EXIT_VIOLATION


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(["validate", *(sys.argv[1:] if argv is None else argv)])

    def job() -> int:
        result = pipeline.validate(spark_session(args), args.out, validation_config(args))
        print(checks_table(result))
        print(f"\n{passed(result)}; Data Docs: {result.data_docs}")
        return EXIT_OK if result.success else EXIT_VIOLATION

    return guarded(job, "validate", debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
