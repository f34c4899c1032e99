"""Which repeated sequence ranges hold other records: the evidence of the ``sequence_reuse`` explanation.

A batch with the producer, epoch and sequence range of an earlier batch of its partition is a
``DUPLICATE``. After the broker forgot the producer (``producer.id.expiration.ms``) it takes such a
batch whatever it holds, and two cases look alike in the batch headers:

- the producer sent **the same records again** (a retry that arrived late, or an application's
  resend): a consumer receives them twice;
- the producer **reused its sequence numbers with other records** (a client that restarted its
  sequences once the broker answered that it did not know it): nothing repeats for a consumer.

The batch's CRC cannot tell them apart: it covers the timestamps, and a resend stamped with the time
it is sent again, or a LogAppendTime batch stamped at each append, has a new CRC over the same
records. The records can: :func:`records_differ` compares the key and value hashes of the export's
``records`` position by position (the offset within the batch, which is the sequence within the
range), and calls a batch's records different only when every position differs from every earlier
batch of its range, each batch whole (as many records as offsets, all of them exported). Anything
less proves nothing, and the batch stays what the replay says: a ``DUPLICATE`` that fails
``no_duplicate_batch``. Without records exported nothing is compared.

The repeated ranges are few (each is an anomaly), so the frames compared are small; the batches are
scanned once for them by their narrow columns, and the records once by a broadcast of those batches.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analytics.spark.columns import log_dir_column

# A batch's range: its partition folder (the replay's history, or finer), producer, epoch and sequences.
RANGE_KEY = ("_dir", "producer_id", "producer_epoch", "base_sequence", "last_sequence")
# A batch of the export: its file and place in it.
BATCH = ("file", "file_position")


def records_differ(batches: DataFrame, records: DataFrame | None,
                   new: DataFrame | None = None) -> DataFrame | None:
    """``(file, file_position, records_differ)`` of each batch (of ``batches``, the export's) that repeats
    an earlier batch's range and whose records differ from those of every earlier one (see the module);
    None when there is none, or no ``records``. ``new``: only the ranges some of these batches hold
    (an incremental audit's batches to replay); None: every range.

    Held (``localCheckpoint``): on a sound log one job here (the aggregate that finds no repeated
    range); a small broadcast wherever the replay reads it."""
    if records is None:
        return None
    repeated = _repeated(batches, new)
    if repeated is None:
        return None
    wanted = F.broadcast(repeated.select("file", F.col("base_offset").alias("batch_base_offset")))
    rows = (records.join(wanted, on=["file", "batch_base_offset"], how="left_semi")
            .select("file", F.col("batch_base_offset").alias("base_offset"),
                    (F.col("offset") - F.col("batch_base_offset")).alias("pos"), "key_hash", "value_hash")
            .localCheckpoint())  # the repeated batches' records alone, read three times below
    counted = rows.groupBy("file", "base_offset").agg(F.count(F.lit(1)).alias("found"))
    batch = (repeated.join(counted, on=["file", "base_offset"], how="left")
             .withColumn("whole", F.col("whole") & (F.coalesce("found", F.lit(0)) == F.col("record_count")))
             .drop("found"))
    later, earlier = _side(batch, "a"), _side(batch, "e")
    pairs = later.join(earlier, on=[F.col(_named("a", k)) == F.col(_named("e", k)) for k in RANGE_KEY]).where(
        F.col("e_rank") < F.col("a_rank"))
    same = (pairs.join(_side(rows, "a"), on=["a_file", "a_base_offset"])
            .join(_side(rows, "e"), on=["e_file", "e_base_offset"])
            .where((F.col("a_pos") == F.col("e_pos")) & F.col("a_key_hash").eqNullSafe(F.col("e_key_hash"))
                   & F.col("a_value_hash").eqNullSafe(F.col("e_value_hash")))
            .select("a_file", "a_file_position").distinct())
    differing = (pairs.groupBy("a_file", "a_file_position")
                 .agg(F.min(F.col("a_whole") & F.col("e_whole")).alias("all_whole"))
                 .where(F.col("all_whole"))
                 .join(same, on=["a_file", "a_file_position"], how="left_anti"))
    found = differing.select(F.col("a_file").alias("file"), F.col("a_file_position").alias("file_position"),
                             F.lit(True).alias("records_differ")).localCheckpoint()
    return None if found.isEmpty() else found


def _repeated(batches: DataFrame, new: DataFrame | None) -> DataFrame | None:
    """The data batches whose range another batch holds too (None: no range repeats), held: their
    range, ``base_offset``, ``record_count``, ``_rank`` (their order within the range) and ``whole``
    (as many records as offsets: no record was compacted away). One hash aggregate of the batches'
    narrow columns finds the ranges held twice (on a sound log, none: nothing more is done)."""
    def data(df: DataFrame) -> DataFrame:
        return (df.where((F.col("producer_id") >= 0) & ~F.col("is_control") & F.col("crc_valid")
                         & (F.col("magic") == 2))
                .withColumn("_dir", log_dir_column(1)))

    rows = data(batches).select(*RANGE_KEY, *BATCH, "base_offset", "last_offset", "record_count")
    if new is not None:
        rows = rows.join(data(new).select(*RANGE_KEY).distinct(), on=list(RANGE_KEY), how="left_semi")
    ranges = (rows.groupBy(*RANGE_KEY).agg(F.count(F.lit(1)).alias("_copies")).where(F.col("_copies") > 1)
              .drop("_copies").localCheckpoint())
    if ranges.isEmpty():
        return None
    by_range = Window.partitionBy(*RANGE_KEY).orderBy("base_offset", *BATCH)
    return (rows.join(ranges, on=list(RANGE_KEY), how="left_semi")
            .withColumn("_rank", F.row_number().over(by_range))
            .withColumn("whole",
                        F.col("record_count").cast("long") == F.col("last_offset") - F.col("base_offset") + 1)
            .drop("last_offset").localCheckpoint())


def _side(df: DataFrame, side: str) -> DataFrame:
    """``df`` with every column prefixed ``<side>_`` (``_dir`` as ``<side>_dir``)."""
    return df.select(*[F.col(c).alias(_named(side, c)) for c in df.columns])


def _named(side: str, column: str) -> str:
    return f"{side}{column}" if column.startswith("_") else f"{side}_{column}"
