"""Post-incident questions over an audit: ``explain`` one offset, a ``producer``'s history, ``sql``.

Each answer reads only what it needs. ``batch_verdicts`` is written partitioned by topic and
clustered by partition and offset (``analytics.audit.job``), so a filter on topic prunes folders
and a filter on partition and offset skips Parquet row groups by their statistics: ``explain``
touches one topic-partition, ``producer`` first finds the partitions a producer wrote from the
small ``producer_sessions`` table and then reads only those. Results are small Python values;
nothing large is collected to the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analytics.audit.job import read_audit
from analytics.publish import Store
from analytics.contract import (
    ABORTED,
    COMPACTION,
    CORRUPT,
    DUPLICATE,
    FINDING_SEVERITIES,
    HANGING,
    NON_IDEMPOTENT,
    OPEN,
    PARTIAL_HISTORY,
    PRODUCER_EXPIRATION,
    SEQUENCE_GAP,
    SEQUENCE_REGRESSION,
    SEV_VIOLATION,
    STATE_LOSS,
    TABLES,
    VERDICT_MEANING,
)

# The columns an explanation shows for a batch and its neighbours.
BATCH_FIELDS = (
    "topic", "partition", "file", "file_position", "base_offset", "last_offset", "record_count", "max_timestamp",
    "producer_id", "producer_epoch", "base_sequence", "last_sequence", "is_transactional", "is_control",
    "control_type", "coordinator_epoch", "crc_valid", "verdict", "severity", "explained_by", "expected_sequence",
    "prev_base_offset", "idle_ms", "offset_holes", "explanation", "txn_open", "offset_overlap",
    "expired_offset", "conflict_offset",
)
# Columns of batch_verdicts newer than some audits on disk: read as null from those.
LATER_COLUMNS = ("expired_offset", "conflict_offset")


class NotFound(Exception):
    """The audit holds nothing for the question asked."""


def _table(spark, out: str, name: str):
    """A table under OUT as a DataFrame."""
    return spark.read.parquet(Store(out).path(name))


def register_views(spark, out: str) -> list[str]:
    """Every table present under OUT as a temporary view of its name; returns the names registered."""
    names = []
    for name in TABLES:
        path = Store(out).path(name)
        if Store(out).is_dir(name):
            spark.read.parquet(path).createOrReplaceTempView(name)
            names.append(name)
    return names


def _verdicts(spark, out: str, topic: str):
    from pyspark.sql import functions as F

    # a filter on the partition column: Spark lists and reads the one topic's folder
    return _with_later_columns(_table(spark, out, "batch_verdicts").where(F.col("topic") == topic))


def _with_later_columns(df):
    from pyspark.sql import functions as F

    for c in LATER_COLUMNS:
        if c not in df.columns:
            df = df.withColumn(c, F.lit(None).cast("long"))
    return df


# -- explain --------------------------------------------------------------------------------------
@dataclass
class Explanation:
    topic: str
    partition: int
    offset: int
    batches: list[dict]  # the batch(es) holding the offset in the log dir explained (more than one only in a broken log)
    before: list[dict]  # the producer's batches before it, nearest last
    after: list[dict]  # the producer's batches after it, nearest first
    reasoning: list[str]  # sentences, in order
    earlier_copy: dict | None = None  # for a DUPLICATE: the first batch with the same range
    transaction: dict | None = None  # the transaction the batch belongs to, if any
    nearest: dict = field(default_factory=dict)  # when no batch holds the offset: the batches around it
    log_dir: str | None = None  # the log dir (broker) whose log is explained
    log_dirs: list[str] = field(default_factory=list)  # every log dir holding batches of the partition
    # for a break explained by an earlier expiration of its producer: the batch at its expired_offset
    expiry: dict | None = None


def explain(spark, out: str, topic: str, partition: int, offset: int, context: int = 3,
            log_dir: str | None = None) -> Explanation:
    """The batch holding ``offset`` in one log dir of the partition, its producer's neighbours there,
    the verdict and why.

    The same partition exported from several log dirs (replicas on several brokers) is several
    logs, each replayed apart: one is explained, ``log_dir`` (the folder above the partition folder,
    or its trailing components) names which; by default the first, in path order, holding the offset.
    """
    from pyspark.sql import functions as F

    from analytics.spark.columns import with_log_dir

    summary = read_audit(out)
    config = summary["configuration"]
    rows = _verdicts(spark, out, topic).where(F.col("partition") == partition)
    # the partition's log dirs, from the segments table (a row per file read: small)
    segments = with_log_dir(_table(spark, out, "segments").where(
        (F.col("topic") == topic) & (F.col("partition") == partition) & (F.col("batch_count") > 0)))
    dirs = [r[0] for r in segments.select("log_dir").distinct().orderBy("log_dir").collect()]
    if not dirs:
        raise NotFound(f"{topic}-{partition} has no batches in this audit")
    everywhere = [r.asDict() for r in with_log_dir(rows).where((F.col("base_offset") <= offset) & (F.col("last_offset") >= offset))
                  .select("log_dir", *BATCH_FIELDS).orderBy("log_dir", "base_offset", "file", "file_position").collect()]
    where = [r.pop("log_dir") for r in everywhere]
    dirs_holding = list(dict.fromkeys(where))
    if log_dir is not None:
        wanted = log_dir.rstrip("/")
        matches = [d for d in dirs if d == wanted or d.endswith("/" + wanted)]
        if len(matches) != 1:
            how = "no" if not matches else "more than one"
            raise NotFound(f"{how} log dir of {topic}-{partition} matches {log_dir!r}; its log dirs: {', '.join(dirs)}")
        chosen = matches[0]
    else:
        chosen = dirs_holding[0] if dirs_holding else dirs[0]
    if len(dirs) > 1:  # the prefix skips row groups of the other log dirs; the log dir is exact
        rows = with_log_dir(rows.where(F.col("file").startswith(chosen + "/"))).where(F.col("log_dir") == chosen)
    holding = [r for r, d in zip(everywhere, where) if d == chosen]
    result = Explanation(topic, partition, offset, holding, [], [], [], log_dir=chosen, log_dirs=dirs)
    if not holding:
        below = rows.where(F.col("last_offset") < offset).orderBy(F.col("last_offset").desc()).select(*BATCH_FIELDS).first()
        above = rows.where(F.col("base_offset") > offset).orderBy("base_offset").select(*BATCH_FIELDS).first()
        if below is None and above is None:
            raise NotFound(f"{topic}-{partition} has no batches in {chosen}")
        result.nearest = {"below": below and below.asDict(), "above": above and above.asDict()}
        result.reasoning = _no_batch_reasoning(spark, out, topic, partition, offset, result.nearest, chosen)
        result.reasoning.extend(_other_log_dirs(result, dirs_holding))
        return result
    batch = holding[0]
    if batch["producer_id"] is not None and batch["producer_id"] >= 0:
        same = rows.where(F.col("producer_id") == batch["producer_id"]).select(*BATCH_FIELDS)
        result.before = [r.asDict() for r in reversed(
            same.where(F.col("base_offset") < batch["base_offset"]).orderBy(F.col("base_offset").desc()).limit(context).collect())]
        result.after = [r.asDict() for r in
                        same.where(F.col("base_offset") > batch["base_offset"]).orderBy("base_offset").limit(context).collect()]
        if batch["verdict"] == DUPLICATE:
            first = same.where((F.col("producer_epoch") == batch["producer_epoch"])
                               & (F.col("base_sequence") == batch["base_sequence"])
                               & (F.col("last_sequence") == batch["last_sequence"])
                               & (F.col("base_offset") < batch["base_offset"]) & ~F.col("is_control")
                               ).orderBy("base_offset").first()
            result.earlier_copy = first and first.asDict()
        if batch["is_transactional"]:
            result.transaction = _transaction_of(spark, out, batch, chosen)
        if (batch["explained_by"] == PRODUCER_EXPIRATION and batch["expired_offset"] is not None
                and batch["expired_offset"] < batch["base_offset"]):
            point = same.where(F.col("base_offset") == batch["expired_offset"]).first()
            result.expiry = point and point.asDict()
    result.reasoning = _reasoning(batch, result, config)
    if len(holding) > 1:
        result.reasoning.append(f"{len(holding)} batches hold offset {offset}: the log repeats offsets "
                                "(see offset_overlap and the segment_integrity suite).")
    result.reasoning.extend(_other_log_dirs(result, dirs_holding))
    return result


def _other_log_dirs(result: Explanation, holding: list[str]) -> list[str]:
    """A sentence for a partition exported from several log dirs: which one is explained, and where
    else the offset is held."""
    if len(result.log_dirs) < 2:
        return []
    says = [(f"The partition is in {len(result.log_dirs)} log dirs, each replayed apart; this is the log of "
             f"{result.log_dir} (--log-dir chooses another).")]
    others = [d for d in holding if d != result.log_dir]
    if others:
        says.append(f"Offset {result.offset} is also held in {', '.join(others)}.")
    return says


def _transaction_of(spark, out: str, batch: dict, log_dir: str) -> dict | None:
    from pyspark.sql import functions as F

    path = Store(out).path("transactions")
    if not Store(out).is_dir("transactions"):
        return None
    t = spark.read.parquet(path)
    if "log_dir" in t.columns:
        t = t.where(F.col("log_dir") == log_dir)
    t = t.where(
        (F.col("topic") == batch["topic"]) & (F.col("partition") == batch["partition"])
        & (F.col("producer_id") == batch["producer_id"]) & (F.col("first_offset") <= batch["base_offset"])
        & (F.col("end_offset").isNull() | (F.col("end_offset") >= batch["base_offset"]))
    ).orderBy(F.col("first_offset").desc()).first()
    return t and t.asDict()


def _ms(ms) -> str:
    """Milliseconds with a human unit: ``90,000,000 ms (25 h)``."""
    from analytics.report.render import human_ms

    if ms is None:
        return "unknown"
    return f"{ms:,} ms ({human_ms(ms)})" if abs(ms) >= 1000 else f"{ms:,} ms"


def utc(ms) -> str | None:
    """Epoch milliseconds as UTC text to the millisecond; None stays None."""
    import datetime

    if ms is None:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _when(ms) -> str:
    return "at an unknown time" if ms is None or ms < 0 else f"{utc(ms)} UTC"


def _reasoning(b: dict, result: Explanation, config: dict) -> list[str]:
    """The verdict in words: what the broker expected, what the log shows, and the evidence."""
    verdict = b["verdict"]
    says = [f"{verdict}: {VERDICT_MEANING.get(verdict, verdict)}."]
    if b["producer_id"] is None or b["producer_id"] < 0 or verdict in (NON_IDEMPOTENT, CORRUPT):
        return says + ([b["explanation"]] if b["explanation"] else [])
    seen = f"producer {b['producer_id']} epoch {b['producer_epoch']}"
    if b["is_control"]:
        says.append(f"A {b['control_type'] or 'control'} marker of {seen}, coordinator epoch {b['coordinator_epoch']}.")
    else:
        records = f"{b['record_count']} record{'' if b['record_count'] == 1 else 's'}"
        says.append(f"Seen: {seen}, sequences {b['base_sequence']}..{b['last_sequence']} "
                    f"({records} at offsets {b['base_offset']}..{b['last_offset']}, written {_when(b['max_timestamp'])}).")
    prev = result.before[-1] if result.before else None
    if prev is None:
        says.append("This is the producer's first batch in the exported log of this partition.")
    else:
        left = (f"sequence {prev['last_sequence']}" if not prev["is_control"]
                else f"a {prev['control_type'] or 'control'} marker")
        says.append(f"Before it: offset {prev['base_offset']}, epoch {prev['producer_epoch']}, {left}.")
    if b["expected_sequence"] is not None and not b["is_control"]:
        match = "and saw it" if b["expected_sequence"] == b["base_sequence"] else f"but saw {b['base_sequence']}"
        says.append(f"The broker expected sequence {b['expected_sequence']} {match}.")
    expiration = config.get("producer_id_expiration_ms")
    if b["idle_ms"] is not None:
        relation = "at least" if expiration is not None and b["idle_ms"] >= expiration else "below"
        says.append(f"Idle {_ms(b['idle_ms'])} since the producer's previous batch: {relation} "
                    f"producer.id.expiration.ms = {_ms(expiration)}.")
    if b["offset_holes"]:
        says.append(f"{b['offset_holes']:,} offsets between the two batches are carried by no batch "
                    "(removed by compaction, or missing from the export).")
    if b["txn_open"]:
        says.append("A transaction of this producer was open before this batch.")
    if result.earlier_copy:
        e = result.earlier_copy
        says.append(f"The first copy is at offset {e['base_offset']} ({e['file']} position {e['file_position']}).")
    if result.transaction:
        t = result.transaction
        end = f"ends at {t['end_offset']}" if t["end_offset"] is not None else "has no marker in the log"
        says.append(f"It belongs to a transaction from offset {t['first_offset']} that {end}: {t['status']}.")
    says.extend(_evidence(b, config, result.expiry))
    if b["severity"] == SEV_VIOLATION:
        says.append("No evidence in the log or the configuration explains it: a violation.")
    return says


def _evidence(b: dict, config: dict, expiry: dict | None = None) -> list[str]:
    """Why an ``explained_by`` holds, restated from the row, the configuration and (for a repeat
    after an expiration) the batch at the producer's expiry point."""
    why = b["explained_by"]
    expiration = config.get("producer_id_expiration_ms")
    if why == PRODUCER_EXPIRATION and expiry is not None and b.get("conflict_offset") is not None:
        original = {DUPLICATE: "its original batch", SEQUENCE_GAP: "the batch holding its highest sequence",
                    SEQUENCE_REGRESSION: "the batch holding its highest sequence"}.get(b["verdict"], "the batch")
        return [f"Explained by producer expiration: the producer was idle {_ms(expiry['idle_ms'])} before offset "
                f"{expiry['base_offset']} (at least producer.id.expiration.ms {_ms(expiration)}, no open "
                f"transaction), after {original} at offset {b['conflict_offset']}: the broker had forgotten it "
                "and took this batch in sequence with what the producer wrote since."]
    if why == PRODUCER_EXPIRATION:
        return [f"Explained by producer expiration: idle {_ms(b['idle_ms'])} >= producer.id.expiration.ms "
                f"{_ms(config.get('producer_id_expiration_ms'))} with no open transaction, so the broker had "
                "forgotten the producer and accepted its next batch as new."]
    if why == PARTIAL_HISTORY:
        return ["Explained by partial history: the producer's earlier batches lie below the log start "
                "(deleted by retention or compaction) or outside the export."]
    if why == COMPACTION:
        return ["Explained by compaction: the topic is compacted and the offset holes between the two batches "
                f"({b['offset_holes']}) cover the missing sequences."]
    if why == STATE_LOSS:
        restarts = config.get("broker_restarts") or []
        return [f"Explained by state loss: a broker restart given in the configuration ({restarts}) lies between "
                "the producer's previous batch and this one."]
    return []


def _no_batch_reasoning(spark, out, topic, partition, offset, nearest, log_dir) -> list[str]:
    from pyspark.sql import functions as F

    from analytics.spark.columns import with_log_dir

    below, above = nearest["below"], nearest["above"]
    says = [f"No batch of the export holds offset {offset}."]
    starts_path = Store(out).path("log_start_offsets")
    start = None
    if Store(out).is_dir("log_start_offsets"):
        starts = spark.read.parquet(starts_path).where((F.col("topic") == topic) & (F.col("partition") == partition))
        if "file" in starts.columns:  # the checkpoint of the log dir explained (exports before it kept no file)
            starts = with_log_dir(starts, levels=1).where(F.col("log_dir") == log_dir)
        start = starts.agg(F.max("log_start_offset")).first()[0]
    if below is None:
        says.append(f"It lies before the first exported batch (offset {above['base_offset']})"
                    + (f"; the log start offset is {start}." if start is not None else "."))
    elif above is None:
        says.append(f"It lies after the last exported batch (offsets {below['base_offset']}..{below['last_offset']}).")
    else:
        says.append(f"It falls between the batches at {below['base_offset']}..{below['last_offset']} and "
                    f"{above['base_offset']}..{above['last_offset']}: records removed by compaction, or a segment "
                    "missing from the export.")
    return says


# -- producer -------------------------------------------------------------------------------------
@dataclass
class ProducerHistory:
    producer_id: int
    sessions: list[dict]  # one per (topic, partition, epoch), in time order
    epoch_changes: list[dict]  # where and when the producer's epoch changed
    findings: list[dict]  # its batches whose severity is explained or violation
    findings_total: int
    transactions: list[dict]
    transactions_total: int
    idle: list[dict]  # its longest pauses, and every pause at or above the expiration
    expiration_ms: int


def producer_history(spark, out: str, producer_id: int, topic: str | None = None, limit: int = 50) -> ProducerHistory:
    from pyspark.sql import functions as F

    from analytics.spark.columns import with_log_dir

    summary = read_audit(out)
    expiration = summary["configuration"].get("producer_id_expiration_ms")
    sessions = _table(spark, out, "producer_sessions").where(F.col("producer_id") == producer_id)
    if topic is not None:
        sessions = sessions.where(F.col("topic") == topic)
    order = ["first_timestamp", "topic", "partition", "producer_epoch", *(["log_dir"] if "log_dir" in sessions.columns else [])]
    session_rows = [r.asDict() for r in sessions.orderBy(*order).collect()]
    if not session_rows:
        scope = f" on topic {topic}" if topic is not None else ""
        raise NotFound(f"producer {producer_id} wrote no batch{scope} in this audit")
    wanted = sorted({(s["topic"], s["partition"]) for s in session_rows})
    anomalies = _with_later_columns(_table(spark, out, "anomalies")).where(
        (F.col("producer_id") == producer_id) & F.col("severity").isin(*FINDING_SEVERITIES))
    if topic is not None:
        anomalies = anomalies.where(F.col("topic") == topic)
    changes = _epoch_changes(spark, out, producer_id, wanted, limit)
    findings_total = anomalies.count()
    findings = [r.asDict() for r in with_log_dir(anomalies).select(*BATCH_FIELDS, "log_dir")
                .orderBy("topic", "partition", "base_offset", "log_dir").limit(limit).collect()]
    txns, txns_total = [], 0
    tpath = Store(out).path("transactions")
    if Store(out).is_dir("transactions"):
        t = spark.read.parquet(tpath).where(F.col("producer_id") == producer_id)
        if topic is not None:
            t = t.where(F.col("topic") == topic)
        txns_total = t.count()
        order = F.when(F.col("status") == HANGING, 0).when(F.col("status") == OPEN, 1).when(
            F.col("status") == ABORTED, 2).otherwise(3)
        txns = [r.asDict() for r in t.orderBy(order, "topic", "partition", "first_offset").limit(limit).collect()]
    # pauses: only the partitions the producer wrote, read by topic folder and partition
    idle_rows = []
    for t_name in sorted({t for t, _ in wanted}):
        parts = [p for t, p in wanted if t == t_name]
        v = _verdicts(spark, out, t_name).where(F.col("partition").isin(parts) & (F.col("producer_id") == producer_id)
                                                & F.col("idle_ms").isNotNull())
        v = with_log_dir(v).select("topic", "partition", "base_offset", "prev_base_offset", "max_timestamp", "idle_ms",
                                   "verdict", "severity", "explained_by", "log_dir")
        longest = v.orderBy(F.col("idle_ms").desc()).limit(5)
        expired = v.where(F.col("idle_ms") >= F.lit(expiration if expiration is not None else 2**62)).limit(limit)
        idle_rows += [r.asDict() for r in longest.union(expired).distinct().orderBy("partition", "base_offset", "log_dir").collect()]
    return ProducerHistory(producer_id, session_rows, changes, findings, findings_total, txns, txns_total,
                           idle_rows, expiration)


def _epoch_changes(spark, out: str, producer_id: int, wanted: list[tuple], limit: int) -> list[dict]:
    """Every batch of the producer whose epoch differs from its previous batch's, in offset order per partition."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from analytics.spark.columns import with_log_dir

    changes = []
    for t_name in sorted({t for t, _ in wanted}):
        parts = [p for t, p in wanted if t == t_name]
        v = with_log_dir(_verdicts(spark, out, t_name)).where(
            F.col("partition").isin(parts) & (F.col("producer_id") == producer_id) & F.col("crc_valid"))
        w = Window.partitionBy("log_dir", "topic", "partition").orderBy("base_offset", "file_position")
        moved = v.select("topic", "partition", "base_offset", "max_timestamp", "producer_epoch", "verdict", "is_control",
                         "log_dir", F.lag("producer_epoch").over(w).alias("from_epoch")).where(
            F.col("from_epoch") != F.col("producer_epoch"))
        changes += [{"topic": r["topic"], "partition": r["partition"], "from_epoch": r["from_epoch"],
                     "to_epoch": r["producer_epoch"], "at_offset": r["base_offset"], "at_timestamp": r["max_timestamp"],
                     "verdict": r["verdict"], "log_dir": r["log_dir"]}
                    for r in moved.orderBy("partition", "base_offset", "log_dir").limit(limit).collect()]
    return changes


# -- sql --------------------------------------------------------------------------------------------
def run_sql(spark, out: str, query: str):
    """The query's DataFrame, with every table of OUT registered as a view."""
    if not register_views(spark, out):
        raise NotFound(f"{out} holds no segaudit tables")
    return spark.sql(query)
