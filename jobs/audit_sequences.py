"""spark-submit entry point of the audit: the same options as `segaudit audit`.

    spark-submit --master spark://host:7077 jobs/audit_sequences.py /shared/audit/broker-1 --config audit.toml
"""

from __future__ import annotations

import sys

from analytics.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    return cli_main(["audit", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
