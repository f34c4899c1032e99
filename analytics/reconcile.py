"""The reconcile stage: what the log holds per time bucket, against what the producers say they sent.

``OUT/reconciliation`` has one row per log dir, topic, partition and bucket of record timestamps
(``bucket_ms``, 10 minutes by default): the data records in the log, the repeated copies among them
(``record_duplicates``: the dedup key of the audit, counted in the bucket of the copy; ``duplicated``
counts the copies a read_committed consumer receives twice, kind ``duplicate``), the distinct records
(the records less every repeat, copies after or in an aborted transaction too), and, with
producer-side counts, the records expected and those missing (expected minus distinct) or beyond
what was expected (``surplus``). "How many did we lose or double, and
when" has one answer; without expected counts the table still gives each bucket's counts and copies.

Expected counts (CSV or Parquet): ``bucket_start`` (epoch milliseconds, or a timestamp) and
``expected``, per ``topic`` and ``partition`` when the file has those columns. A file without
``partition`` states counts per topic, one without ``topic`` for every topic together: the log's
counts are summed to the same level (``level``: partition, topic or all), each log dir apart.
A bucket the file does not list has no expected count (null), not zero; counts for a topic or
partition no log dir holds are rows without a log dir, all missing. Buckets start at multiples
of ``bucket_ms`` since the epoch, and every ``bucket_start`` of the file must be one.

Record timestamps are the producers' (CreateTime) unless a topic is LogAppendTime: there they are
the broker's, and a bucket is when the broker appended.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from analytics.contract import AUDIT, DUP_DUPLICATE, EXPORT, RECONCILE
from analytics.errors import UsageError
from analytics.publish import publication, published, read_manifest

DEFAULT_BUCKET_MS = 10 * 60 * 1000
LEVELS = ("partition", "topic", "all")  # what the expected counts are per
KEYS = {"partition": ("topic", "partition"), "topic": ("topic",), "all": ()}


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    out: str
    run_id: str
    level: str
    bucket_ms: int
    totals: dict  # expected (None without counts), records, distinct, duplicated, missing, surplus
    seconds: float

    @property
    def sound(self) -> bool:
        """No copy, and with expected counts nothing missing."""
        return not self.totals["duplicated"] and not self.totals["missing"]


def parse_bucket(text: str) -> int:
    """A bucket size: milliseconds, or a number with s, m, h or d (``10m``); UsageError otherwise."""
    units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    number, unit = text.strip(), "ms"
    for suffix in sorted(units, key=len, reverse=True):
        if number.endswith(suffix):
            number, unit = number[: -len(suffix)], suffix
            break
    try:
        ms = int(float(number) * units[unit])
    except ValueError:
        raise UsageError(f"--bucket {text!r}: a size such as 600000, 30s, 10m, 1h or 1d") from None
    if ms <= 0:
        raise UsageError(f"--bucket {text!r}: the size must be positive")
    return ms


def reconcile(spark, out: str, *, expected: str | None = None, bucket_ms: int = DEFAULT_BUCKET_MS,
              progress=None) -> ReconcileResult:
    """Writes ``OUT/reconciliation`` from the audited export in ``out`` (with records)."""
    from pyspark.sql import functions as F

    from analytics.spark.columns import conform
    from analytics.spark.tables import read_parquet

    started = time.monotonic()
    say = progress or (lambda _m: None)
    export_manifest = read_manifest(out, EXPORT)
    audit_manifest = read_manifest(out, AUDIT)
    if not export_manifest.get("records"):
        raise UsageError(f"{out}: reconcile counts records, and this export has none: export with --records")
    given = None if expected is None else _expected(spark, expected, bucket_ms)
    level = "partition" if given is None else given[1]
    with publication(out, RECONCILE, built_from={AUDIT: audit_manifest["run_id"]}) as run:
        counts = _log_counts(spark, out, level, bucket_ms)
        if given is None:
            rows = counts.withColumn("expected", F.lit(None).cast("long"))
        else:
            rows = _joined(counts, given[0], level)
        rows = (rows.withColumn("missing", F.when(F.col("expected").isNotNull(),
                                                  F.greatest(F.col("expected") - F.col("distinct"), F.lit(0))))
                .withColumn("surplus", F.when(F.col("expected").isNotNull(),
                                              F.greatest(F.col("distinct") - F.col("expected"), F.lit(0))))
                .withColumn("bucket_end", F.col("bucket_start") + F.lit(bucket_ms))
                .withColumn("level", F.lit(level))
                .withColumn("bucket_start", F.timestamp_millis("bucket_start"))
                .withColumn("bucket_end", F.timestamp_millis("bucket_end")))
        for key in ("topic", "partition"):
            if key not in rows.columns:
                rows = rows.withColumn(key, F.lit(None))
        table = conform(rows, "reconciliation").orderBy("log_dir", "topic", "partition", "bucket_start")
        table.coalesce(1).write.parquet(run.path("reconciliation"))
        sums = (read_parquet(spark, run.path("reconciliation")).agg(
            *[F.sum(c).alias(c) for c in ("expected", "records", "distinct", "duplicated", "missing", "surplus")])
            .first().asDict())
        totals = {k: (None if v is None else int(v)) for k, v in sums.items()}
        if given is None:
            totals["expected"] = totals["missing"] = totals["surplus"] = None
        run.publish({"expected": expected, "bucket_ms": bucket_ms, "level": level, "totals": totals})
    seconds = time.monotonic() - started
    say(f"reconciled {totals['records']:,} records in {seconds:.1f} s")
    return ReconcileResult(run.store.path(), run.run_id, level, bucket_ms, totals, seconds)


def _log_counts(spark, out: str, level: str, bucket_ms: int):
    """Data records, copies and distinct records per log dir, ``level`` keys and bucket."""
    from pyspark.sql import functions as F

    from analytics.spark.columns import with_log_dir
    from analytics.spark.tables import read_parquet

    view = published(out)
    records = with_log_dir(read_parquet(spark, view.path("records"))).where(~F.coalesce(F.col("is_control"), F.lit(False)))
    duplicates = read_parquet(spark, view.path("record_duplicates"))
    # every repeat under the dedup key makes a record less distinct; only a copy delivered twice (kind
    # "duplicate"; in an audit before kinds, every copy) is a record doubled
    doubled = F.col("kind") == DUP_DUPLICATE if "kind" in duplicates.columns else F.lit(True)
    copies = duplicates.select("log_dir", "topic", "partition", "offset", F.lit(1).alias("copy"),
                               doubled.cast("int").alias("doubled"))
    keys = ["log_dir", *KEYS[level]]
    marked = records.join(copies, ["log_dir", "topic", "partition", "offset"], "left")
    bucketed = marked.withColumn("bucket_start", F.floor(F.col("timestamp") / F.lit(bucket_ms)).cast("long") * bucket_ms)
    return (bucketed.groupBy(*keys, "bucket_start").agg(
        F.count(F.lit(1)).alias("records"), F.coalesce(F.sum("copy"), F.lit(0)).cast("long").alias("copies"),
        F.coalesce(F.sum("doubled"), F.lit(0)).cast("long").alias("duplicated"))
        .withColumn("distinct", F.col("records") - F.col("copies")).drop("copies"))


def _expected(spark, path: str, bucket_ms: int):
    """The expected counts as (DataFrame of keys, bucket_start in ms, expected; level)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, TimestampType

    from analytics.kafka.fs import local_path

    from pyspark.errors import AnalysisException

    if "://" not in path and not os.path.exists(local_path(path)):
        raise UsageError(f"--expected {path}: no such file")
    csv = path.lower().endswith((".csv", ".csv.gz"))
    try:
        df = (spark.read.option("header", True).option("inferSchema", True).csv(path) if csv
              else spark.read.parquet(path))
        df.schema  # noqa: B018 - reading the schema is where a file that is not Parquet fails
    except AnalysisException as exc:
        raise UsageError(f"--expected {path}: not readable as {'CSV' if csv else 'Parquet'} "
                         f"(a .csv file or Parquet): {str(exc).splitlines()[0]}") from None
    columns = {c.lower(): c for c in df.columns}
    missing = [c for c in ("bucket_start", "expected") if c not in columns]
    if missing:
        raise UsageError(f"--expected {path}: needs the columns bucket_start and expected (has {', '.join(df.columns)})")
    level = "partition" if "partition" in columns and "topic" in columns else "topic" if "topic" in columns else "all"
    start = F.col(columns["bucket_start"])
    kind = df.schema[columns["bucket_start"]].dataType
    start_ms = (F.unix_millis(start.cast("timestamp")) if isinstance(kind, TimestampType)
                else start.cast(LongType()) if kind.typeName() in ("integer", "long", "short", "decimal", "double")
                else F.unix_millis(F.to_timestamp(start)))
    keys = [F.col(columns[k]).alias(k) for k in KEYS[level]]
    if "partition" in KEYS[level]:
        keys[1] = keys[1].cast("int").alias("partition")
    given = df.select(*keys, start_ms.alias("bucket_start"), F.col(columns["expected"]).cast("long").alias("expected"))
    bad = given.where(F.col("bucket_start").isNull() | (F.col("bucket_start") % bucket_ms != 0)
                      | F.col("expected").isNull()).limit(1).collect()
    if bad:
        raise UsageError(f"--expected {path}: bucket_start {bad[0]['bucket_start']} with expected {bad[0]['expected']} "
                         f"is not a bucket of {bucket_ms} ms (a multiple of it since the epoch, with a count)")
    summed = given.groupBy(*KEYS[level], "bucket_start").agg(F.sum("expected").alias("expected"))
    return summed, level


def _joined(counts, expected, level: str):
    """The log's counts and the expected counts, bucket by bucket, for every log dir holding the key:
    a bucket with only an expected count has no record in the log. Expected counts for a key no log
    dir holds at all (a topic or partition missing from the export) are rows without a log dir,
    every record of them missing."""
    from pyspark.sql import functions as F

    keys = list(KEYS[level])
    holders = counts.select("log_dir", *keys).distinct()
    if keys:
        wanted = expected.join(holders, keys, "inner")
        orphans = expected.join(holders.select(*keys).distinct(), keys, "left_anti")
    else:
        wanted = expected.crossJoin(holders)
        orphans = expected.where(F.lit(holders.limit(1).count() == 0))
    joined = (counts.join(wanted, ["log_dir", *keys, "bucket_start"], "full")
              .fillna(0, subset=["records", "duplicated", "distinct"]))
    unheld = orphans.select(F.lit(None).cast("string").alias("log_dir"), *keys, "bucket_start", "expected",
                            *[F.lit(0).cast("long").alias(c) for c in ("records", "duplicated", "distinct")])
    return joined.unionByName(unheld)
