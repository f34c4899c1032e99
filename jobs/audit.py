"""spark-submit entry point of the audit: `segaudit audit`, with its options and output.

    spark-submit --master spark://host:7077 jobs/audit.py /shared/audit/broker-1 --config audit.toml

:func:`analytics.cli.commands.audit` (through :func:`jobs.submit`) calls
:func:`analytics.pipeline.audit` with every option (``--incremental``, the history, the
Prometheus file...), on the submitted session. Prints what `segaudit audit` prints; exit code 2 on
bad input, 130/143 when interrupted.
"""

from __future__ import annotations

import sys

from jobs import submit


def main(argv: list[str] | None = None) -> int:
    return submit("audit", argv)


if __name__ == "__main__":
    sys.exit(main())
