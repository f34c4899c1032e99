"""spark-submit entry point of the validation: the same options as `segaudit validate`.

    spark-submit --master spark://host:7077 jobs/validate_expectations.py /shared/audit/broker-1 --config audit.toml

Exit code 1 when an expectation fails, so a scheduler sees the violation.
"""

from __future__ import annotations

import sys

from analytics.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    return cli_main(["validate", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
