"""What publishing costs as commits pile up (commit objects are never deleted): a stage's publication
of one small table, and a reader's resolution of the latest commit, at 1 to N commits, on a local disk
and in versitygw (``--s3``), beside the floor of the same store: one conditional create of a commit
object and one read of it.

    .venv/bin/python bench/bench_publish.py --commits 300
    .venv/bin/python bench/bench_publish.py --commits 300 --s3   # needs bash scripts/versitygw.sh
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analytics.contract import EXPORT  # noqa: E402
from analytics.publish import commits, publication, published  # noqa: E402


def publish_once(out: str, n: int) -> None:
    with publication(out, EXPORT) as run:
        run.store.write_text(f"{run.folder}/batches/part-0", str(n))
        run.publish({})


def floor_once(store: commits.Store, n: int) -> None:
    store.create_text(f"_floor/{n:020d}.json", "{}")
    store.read_text(f"_floor/{n:020d}.json")


def measure(out: str, total: int, marks: list[int]) -> list[tuple[int, float, float, float]]:
    """(commits, ms a publication, ms a reader's resolution, ms the floor) around each mark."""
    store = commits.Store(out)
    rows, pub, done = [], [], 0
    for mark in marks:
        pub.clear()
        while done < mark:
            started = time.perf_counter()
            publish_once(out, done)
            pub.append(time.perf_counter() - started)
            done += 1
        reads = []
        for _ in range(5):
            started = time.perf_counter()
            published(out).path("batches")
            reads.append(time.perf_counter() - started)
        floors = []
        for i in range(5):
            started = time.perf_counter()
            floor_once(store, mark * 10 + i)
            floors.append(time.perf_counter() - started)
        rows.append((mark, 1000 * statistics.median(pub[-10:]), 1000 * statistics.median(reads),
                     1000 * statistics.median(floors)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=300)
    ap.add_argument("--s3", action="store_true", help="in a bucket of versitygw on loopback")
    args = ap.parse_args()
    marks = sorted({m for m in (10, 30, 100, 300, 1000, args.commits) if m <= args.commits})
    with tempfile.TemporaryDirectory() as tmp:
        if args.s3:
            import os

            from tests.s3_server import S3Server

            server = S3Server(Path(tmp) / "s3").start()
            os.environ.update(server.env)
            out = f"{server.make_bucket('bench')}/out"
        else:
            server, out = None, str(Path(tmp) / "out")
        try:
            rows = measure(out, args.commits, marks)
        finally:
            if server is not None:
                server.stop()
    where = "versitygw (loopback)" if args.s3 else "local disk"
    print(f"publishing on {where}: median ms (a publication of the last 10 before the mark; 5 resolutions; "
          f"5 floors: one conditional create and one read)")
    print(f"{'commits':>8} {'publish':>9} {'resolve':>9} {'floor':>9}")
    for mark, pub, read, floor in rows:
        print(f"{mark:>8} {pub:>9.1f} {read:>9.1f} {floor:>9.1f}")


if __name__ == "__main__":
    main()
