"""Metrics over time: each audit appends its counts per topic-partition to a Parquet history, and can
write the same counts in the Prometheus text format for node exporter's textfile collector.

The history lives beside OUT by default (``OUT.history``, a sibling folder, so replacing OUT keeps
it) or wherever ``--history`` says. One row per (run, log dir, topic, partition); an audit run is
appended once: appending a run id the history already holds does nothing, so a retried step
does not count twice.
"""

from __future__ import annotations

import os

import pyarrow as pa

from analytics.contract import HANGING, NAME_KEY, SEQUENCE_GAP, SEV_EXPLAINED, SEV_VIOLATION, VERDICTS
from analytics.publish import Store, published, tables

# Per-partition counts, in order; one column per verdict follows (its name in lower case).
COUNT_COLUMNS = ("batches", "records", "violations", "explained", "explained_gaps", "hanging_transactions")
METRIC_HELP = {
    "batches": "Batches in the audited log.",
    "records": "Records in the audited log's data batches.",
    "violations": "Batches whose verdict breaks a rule with no explanation.",
    "explained": "Batches that break a rule the broker legitimately allowed (explained_by is set).",
    "explained_gaps": "Sequence gaps explained by producer expiration, partial history, compaction or state loss.",
    "hanging_transactions": "Transactions open longer than transaction.max.timeout.ms plus the broker's 5-minute buffer.",
}


def verdict_column(verdict: str) -> str:
    """The history's column counting the batches of ``verdict``: its name in lower case."""
    return verdict.lower()


def default_history_path(out: str) -> str:
    """``OUT.history``: beside OUT, not inside it (the audit replaces OUT's tables on every run)."""
    return out.rstrip("/") + ".history"


def partition_metrics(spark, out: str, run_id: str, run_time_ms: int):
    """One row per (log_dir, topic, partition) of the audit under OUT: ``COUNT_COLUMNS`` and a count per verdict."""
    from pyspark.sql import functions as F

    from analytics.spark.columns import with_log_dir
    from analytics.spark.tables import read_parquet

    keys = list(NAME_KEY)
    v = with_log_dir(read_parquet(spark, published(out).path("batch_verdicts")))
    counts = v.groupBy(*keys).agg(
        F.count("*").alias("batches"),
        F.sum(F.when(~F.col("is_control"), F.col("record_count")).otherwise(0)).cast("long").alias("records"),
        F.sum((F.col("severity") == SEV_VIOLATION).cast("long")).alias("violations"),
        F.sum((F.col("severity") == SEV_EXPLAINED).cast("long")).alias("explained"),
        F.sum(((F.col("verdict") == SEQUENCE_GAP) & (F.col("severity") == SEV_EXPLAINED)).cast("long"))
        .alias("explained_gaps"),
        *[F.sum((F.col("verdict") == name).cast("long")).alias(verdict_column(name)) for name in VERDICTS],
    )
    hanging = read_parquet(spark, published(out).path("transactions")).where(F.col("status") == HANGING) \
        .groupBy(*keys).agg(F.count("*").alias("hanging_transactions"))
    return counts.join(hanging, keys, "left").select(
        F.lit(run_time_ms).cast("long").alias("run_time_ms"), F.lit(run_id).alias("run_id"), *keys,
        *[F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c) for c in COUNT_COLUMNS],
        *[F.col(verdict_column(name)) for name in VERDICTS],
    )


def append_history(spark, metrics, path: str) -> bool:
    """Append ``metrics`` (one run) to the history at ``path``; False when that run is already there."""
    from pyspark.sql import functions as F

    run_id = metrics.select("run_id").first()
    if run_id is None:
        return False
    history = read_history(spark, path)
    if history is not None and history.where(F.col("run_id") == run_id[0]).limit(1).count():
        return False
    # one small file per run, in a folder of its own, then one Delta commit adds it: a crashed append
    # leaves a folder no commit names, which readers never see
    metrics.coalesce(1).write.mode("overwrite").parquet(f"{path.rstrip('/')}/{run_id[0]}")
    tables.append(path, run_id[0])
    return True


def read_history(spark, path: str):
    """The history's rows, or None when there is none yet."""
    from pyspark.errors import AnalysisException

    if not _may_exist(path):  # not asked of Spark: its listeners log a failed read, caught or not
        return None
    files = _delta_files(path)
    if files == []:
        return None
    try:  # any filesystem Spark reads; a missing or empty folder is no history yet
        history = spark.read.parquet(*(files or [path]))
        history.schema  # noqa: B018 - analysed now (Spark Connect analyses a plan only when asked)
        return history
    except AnalysisException as exc:
        if exc.getCondition() in ("PATH_NOT_FOUND", "UNABLE_TO_INFER_SCHEMA"):
            return None
        raise


def _delta_files(path: str) -> list[str] | None:
    """The files of the history's Delta table; None when it is not one (a history of segaudit before
    Delta tables: a folder of Parquet files, read as one)."""
    from deltalake.exceptions import DeltaError

    try:
        return tables.file_uris(path)
    except (OSError, ValueError, pa.ArrowException, DeltaError):
        return None


def _may_exist(path: str) -> bool:
    """False when ``path`` is known not to exist (on a filesystem pyarrow opens); else True."""
    try:
        return Store(path).exists("")
    except (OSError, ValueError, pa.ArrowException):  # a filesystem pyarrow cannot open: Spark is asked
        return True


# -- Prometheus text format ------------------------------------------------------------------------
def _label(value) -> str:
    """A label value in the exposition format: backslash, double quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text(rows: list[dict], run_time_ms: int, prefix: str = "segaudit") -> str:
    """The counts of ``rows`` (``partition_metrics`` rows) as Prometheus gauges, one family per count.

    >>> print(prometheus_text([{"log_dir": "/d", "topic": 't"x', "partition": 0, "batches": 3}], 1000)
    ...       .splitlines()[2])
    segaudit_batches{log_dir="/d",topic="t\\"x",partition="0"} 3
    """
    lines = []
    columns = [(c, None) for c in COUNT_COLUMNS] + [(verdict_column(v), v) for v in VERDICTS]
    for name, verdict in columns:  # verdict: None for a count of its own, else the verdict the column counts
        if not any(name in r for r in rows):
            continue
        metric = f"{prefix}_{name}" if verdict is None else f"{prefix}_verdict_batches"
        if verdict is None or verdict == VERDICTS[0]:
            help_text = METRIC_HELP.get(name, "Batches per verdict of the audit.")
            lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        for r in sorted(rows, key=lambda r: tuple(r[k] for k in NAME_KEY)):
            if name not in r:
                continue
            labels = f'log_dir="{_label(r["log_dir"])}",topic="{_label(r["topic"])}",partition="{r["partition"]}"'
            if verdict is not None:
                labels += f',verdict="{verdict}"'
            lines.append(f"{metric}{{{labels}}} {int(r[name] or 0)}")
    lines += [f"# HELP {prefix}_last_run_timestamp_seconds When the audit these counts come from finished.",
              f"# TYPE {prefix}_last_run_timestamp_seconds gauge",
              f"{prefix}_last_run_timestamp_seconds {run_time_ms / 1000:.3f}"]
    return "\n".join(lines) + "\n"


def write_prometheus(path: str, text: str) -> str:
    """Write atomically (the textfile collector must never read half a file): a temporary file in the
    same folder, then a rename."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path

