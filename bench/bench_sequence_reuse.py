"""What finding sequence reuses costs an audit with records (``analytics.audit.sequence_reuse``).

    .venv/bin/python bench/bench_sequence_reuse.py [--batches N ...] [--work DIR] [--driver-memory 8g]

For each size, a ``clean`` log dir of about N batches (``bench_audit.prepare``, cached in ``--work``)
is exported with records, then audited twice in one application (the steady run counts). Beside it,
the evidence step alone, ``records_differ`` over the export's batches and records, three times
(median): on a log with no repeated range it is the scan of the batches' narrow columns and the
hash aggregate that finds none, which every audit with records pays; the records are read only when some
range repeats. Printed: both times and the step's share of the audit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_audit import prepare  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[400_000, 2_000_000])
    parser.add_argument("--work", type=Path, default=Path("/tmp/segaudit-bench"))
    parser.add_argument("--driver-memory", default="8g")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    outs = {n: prepare(args.work, n, records=True)[0] for n in args.batches}

    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.audit.sequence_reuse import records_differ
    from analytics.publish import published
    from analytics.spark.session import get_spark
    from analytics.spark.tables import read_parquet

    spark = get_spark(conf={"spark.driver.memory": args.driver_memory})
    print(f"{'batches':>10}  {'audit, steady s':>15}  {'records_differ s':>16}  {'share':>6}")
    for n, out in outs.items():
        audited = [audit(spark, str(out), AuditConfig()).seconds for _ in range(2)][-1]
        store = published(str(out))
        batches, records = (read_parquet(spark, store.path(t)) for t in ("batches", "records"))
        step = []
        for _ in range(3):
            started = time.monotonic()
            assert records_differ(batches, records) is None  # a clean log repeats no range
            step.append(time.monotonic() - started)
        alone = statistics.median(step)
        print(f"{n:>10,}  {audited:>15.1f}  {alone:>16.2f}  {alone / audited:>6.1%}")


if __name__ == "__main__":
    main()
