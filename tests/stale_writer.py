"""A writer that goes stale, as its own process: ``python tests/stale_writer.py OUT STAGE TABLE TEXT``
opens a publication of STAGE in OUT (a folder or a bucket), writes TABLE, prints ``ready`` and waits
for a line on stdin (other processes commit meanwhile), then publishes; exit 2 with the Conflict's
line when it may not."""

from __future__ import annotations

import sys
from pathlib import Path

COMMAND = [sys.executable, str(Path(__file__).resolve())]


def main(out: str, stage: str, table: str, text: str) -> int:
    from analytics.publish import Conflict, publication

    try:
        with publication(out, stage) as run:
            run.store.write_text(f"{run.folder}/{table}/part-0", text)
            print("ready", flush=True)
            sys.stdin.readline()
            run.publish({})
    except Conflict as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main(*sys.argv[1:5]))
