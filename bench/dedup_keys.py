"""Candidate dedup keys measured on exported logs: the copies each would count, per topic.

    python bench/dedup_keys.py OUT [OUT ...] [--expect TOPIC=N ...]

Each OUT is an export (or a run) with a ``records`` table. For every candidate key the script counts
the copies ``record_duplicates`` would call ``duplicate`` (delivered twice to a read_committed
consumer), in the topics the check applies to (``contract.topic_kind``), and prints them per topic.
``--expect TOPIC=N``: the number of retried copies a topic really holds (a lost-ACK run's records less
those acknowledged); every other topic is expected to hold none, so a copy counted there is a false
alarm. The last lines sum, per candidate, the false alarms and the retried copies found.

Candidates: ``key_value`` (record key and value hash), ``key_value_headers`` (and the headers' hash),
``key_value_headers_timestamp`` (and the record's timestamp, whatever stamped it) and ``delivery``
(the default: the headers, and the timestamp only in a CreateTime batch; a LogAppendTime batch's
timestamp is the broker's, new at each append, retries included).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import functions as F  # noqa: E402

from analytics.audit import tables  # noqa: E402
from analytics.contract import DUP_DUPLICATE  # noqa: E402
from analytics.publish import published  # noqa: E402


def candidates() -> dict:
    """name -> the key column (a function of whether the records carry ``append_time``)."""
    headers = F.when(F.size("headers") > 0, F.xxhash64("headers")).otherwise(0).cast("string")
    key_value = tables.dedup_expression("key_value")
    return {
        "key_value": lambda _: key_value,
        "key_value_headers": lambda _: F.concat_ws(":", key_value, headers),
        "key_value_headers_timestamp": lambda _: F.concat_ws(":", key_value, headers, F.col("timestamp").cast("string")),
        "delivery": lambda append_time: tables.dedup_expression("delivery", append_time=append_time),
    }


def count(spark, out: str) -> dict[str, dict[str, int]]:
    """candidate -> topic -> copies counted as ``duplicate`` in ``out``."""
    view = published(out)
    records, batches = (spark.read.parquet(view.path(t)) for t in ("records", "batches"))
    counts = {}
    for name, key in candidates().items():
        copies = tables.record_duplicates(records, name, batches, key=key).where(F.col("kind") == DUP_DUPLICATE)
        counts[name] = {r["topic"]: r["count"] for r in copies.groupBy("topic").count().collect()}
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outs", nargs="+", metavar="OUT")
    parser.add_argument("--expect", action="append", default=[], metavar="TOPIC=N")
    args = parser.parse_args(argv)
    expected = {t: int(n) for t, n in (e.split("=", 1) for e in args.expect)}

    from analytics.spark.session import get_spark

    spark = get_spark()
    names = list(candidates())
    totals = {n: [0, 0] for n in names}  # false alarms, retried copies found
    retried = 0
    print(f"{'OUT / topic':<60}{'expected':>9}" + "".join(f"{n:>30}" for n in names))
    for out in args.outs:
        counts = count(spark, out)
        topics = sorted({t for c in counts.values() for t in c} | (set(expected) & _topics(spark, out)))
        for topic in topics:
            want = expected.get(topic, 0)
            retried += want
            row = [counts[n].get(topic, 0) for n in names]
            print(f"{_label(out) + ' / ' + topic:<60}{want:>9}" + "".join(f"{v:>30}" for v in row))
            for n, v in zip(names, row):
                totals[n][0] += max(v - want, 0)
                totals[n][1] += min(v, want)
    print(f"{'false alarms':<69}" + "".join(f"{totals[n][0]:>30}" for n in names))
    print(f"{'retried copies found, of ' + str(retried):<69}" + "".join(f"{totals[n][1]:>30}" for n in names))
    return 0


def _label(out: str) -> str:
    """The last two folders of ``out`` (``kafka-4.4.0/final``)."""
    return "/".join(Path(out).resolve().parts[-2:])


def _topics(spark, out: str) -> set[str]:
    return {r["topic"] for r in spark.read.parquet(published(out).path("records")).select("topic").distinct().collect()}


if __name__ == "__main__":
    sys.exit(main())
