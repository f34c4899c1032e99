"""spark-submit entry point of the validation: `segaudit validate`, with its options and output.

    spark-submit --master spark://host:7077 jobs/validate.py /shared/audit/broker-1 --config audit.toml

:func:`analytics.cli.commands.validate` (through :func:`jobs.submit`) calls
:func:`analytics.pipeline.validate` with every option, on the submitted session. Prints what
`segaudit validate` prints; exit code 1 when an expectation fails, so a scheduler sees the
violation, 2 on bad input, 130/143 when interrupted.
"""

from __future__ import annotations

import sys

from jobs import submit


def main(argv: list[str] | None = None) -> int:
    return submit("validate", argv)


if __name__ == "__main__":
    sys.exit(main())
