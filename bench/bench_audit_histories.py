"""The audit of the same batches as few long histories against many short ones, side by side.

    .venv/bin/python bench/bench_audit_histories.py OUT [--split 4] [--repeat 3] [--driver-memory 8g]

The replay's window stage runs one task per history (log dir, topic and partition), so an export
with fewer partitions than cores leaves cores idle while the longest history replays. This
bench bounds what spreading a history over several tasks could gain: it copies the export OUT
with every partition cut into ``--split`` partitions at offset boundaries (each cut is a new
partition folder, so each piece is its own history; a producer crossing a cut is first seen
there, a handful of explained rows), then audits the original and the copy alternately in one
Spark session, after one warm-up audit of each, and prints each run and the mean.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

AUDIT_OUTPUTS = {"batch_verdicts", "anomalies", "producer_sessions", "transactions", "snapshot_checks",
                 "record_duplicates", "summary.json", "_audit.json"}


def split_copy(spark, out: Path, target: Path, split: int) -> None:
    """``target``: the export ``out`` with each partition's batches cut into ``split`` offset ranges."""
    from pyspark.sql import functions as F

    from analytics.spark.columns import with_log_dir

    from analytics.contract import EXPORT
    from analytics.publish import published, read_manifest

    if (target / "_export.json").exists():
        return
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    export_run = read_manifest(str(out), EXPORT)["run_id"]
    for item in out.iterdir():  # the export as published: its run folder, the commits, OUT's links
        if item.name in AUDIT_OUTPUTS or item.name.startswith("."):
            continue
        if item.is_symlink():
            (target / item.name).symlink_to(item.readlink())
        elif item.name == "_runs":  # the export's run only, not the audits'
            shutil.copytree(item / export_run, target / "_runs" / export_run, symlinks=True)
        elif item.is_dir():
            shutil.copytree(item, target / item.name, symlinks=True)
        else:
            shutil.copy(item, target / item.name)
    batches = spark.read.parquet(published(str(out)).path("batches"))
    bounds = batches.groupBy("topic", "partition").agg(F.max("last_offset").alias("end"))
    piece = F.least((F.col("base_offset") * split / (F.col("end") + 1)).cast("int"), F.lit(split - 1))
    cut = batches.join(F.broadcast(bounds), ["topic", "partition"]).withColumn("partition", F.col("partition") * split + piece)
    # the partition folder names the piece: topic-P/segment.log -> topic-P'/segment.log
    cut = with_log_dir(cut).withColumn("file", F.concat_ws(
        "/", "log_dir", F.concat_ws("-", "topic", F.col("partition").cast("string")), F.substring_index("file", "/", -1)))
    # the cut where the audit reads the export's batches: the copied run folder's, in its place
    where = Path(published(str(target)).path("batches"))
    cut.select(*batches.columns).write.partitionBy("topic").parquet(str(target / ".cut"))
    shutil.rmtree(where)
    (target / ".cut").rename(where)
    (target / "_export.json").write_text((out / "_export.json").read_text())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="an export (for example one bench_audit.py wrote)")
    ap.add_argument("--split", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--driver-memory", default="8g")
    args = ap.parse_args(argv)

    from analytics.audit.config import AuditConfig
    from analytics.audit.job import audit
    from analytics.spark.session import get_spark

    spark = get_spark(conf={"spark.driver.memory": args.driver_memory})
    out = args.out.resolve()
    target = out.parent / f"{out.name}.split{args.split}"
    split_copy(spark, out, target, args.split)
    config = AuditConfig()
    cases = {"as exported": out, f"each partition cut in {args.split}": target}
    for path in cases.values():
        audit(spark, str(path), config)  # warm-up
    times: dict[str, list[float]] = {label: [] for label in cases}
    for _ in range(args.repeat):
        for label, path in cases.items():
            t0 = time.perf_counter()
            result = audit(spark, str(path), config)
            times[label].append(time.perf_counter() - t0)
            print(f"{label:<28} {times[label][-1]:7.1f} s   {result.severities}", flush=True)
    for label, runs in times.items():
        print(f"{label:<28} mean {sum(runs) / len(runs):7.1f} s   best {min(runs):7.1f} s")


if __name__ == "__main__":
    main()
