"""spark-submit entry point of the audit: the same options as `segaudit audit`.

    spark-submit --master spark://host:7077 jobs/audit_sequences.py /shared/audit/broker-1 --config audit.toml

Calls :func:`analytics.pipeline.audit`.
"""

from __future__ import annotations

import sys

from analytics import pipeline
from analytics.cli.main import guarded, parser
from analytics.cli.options import audit_config, history_options, spark_session
from analytics.contract import EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(["audit", *(sys.argv[1:] if argv is None else argv)])

    def job() -> int:
        result = pipeline.audit(spark_session(args), args.out, audit_config(args), **history_options(args))
        print(f"audited {sum(result.verdicts.values())} batches: " +
              ", ".join(f"{s} {n}" for s, n in result.severities.items()))
        return EXIT_OK

    return guarded(job, "audit", debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
