"""The former name of `jobs/export.py` (`segaudit export`), kept so that schedules written for it
still run: it runs that job, after one line on stderr naming the new path."""

from __future__ import annotations

import sys

from jobs import renamed


def main(argv: list[str] | None = None) -> int:
    return renamed("export_segments", "export", argv)


if __name__ == "__main__":
    sys.exit(main())
