"""The export over the Kafka protocol against the export of the same data from the broker's data
directory and against a plain consumer, on one real broker (Kafka's jars, as the tests start it).

    .venv/bin/python bench/bench_fetch.py [--version 4.4.0] [--records 2000000] [--record-size 100]
                                          [--partitions 2] [--single] [--rate-mib 4]

Kafka's own ProducerPerformance fills a topic (``--single``: one record per batch, ``batch.size=1``;
else the producer's defaults with ``linger.ms=5``). Then, each in the same Spark application (the
first case pays for the Python workers' start), on the running broker:

- ``segaudit export kafka://...``: the batches (no records) over the protocol;
- ``segaudit export LOGDIR``: the same partitions from a copy of the broker's data directory;
- ``KafkaConsumer``: kafka-python reading every record of the topic (CRCs checked), one process;
- the rate limit: the protocol export again with ``--max-bytes-per-second``, its fetched bytes
  over the fetch stage's time (from the Spark job's task metrics) against the limit;
- memory: the protocol export in a fresh process at Spark's default driver memory, peak resident
  memory of its process tree, for the whole topic and for one partition of it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_export import peak_of  # noqa: E402

TOPIC = "bench"


def produce(cluster, jars: Path, records: int, size: int, single: bool) -> float:
    from tests.kafka_cluster import java

    props = [f"bootstrap.servers={cluster.bootstrap}", "acks=all", "enable.idempotence=true",
             *(["batch.size=1", "linger.ms=0"] if single else ["linger.ms=5"])]
    t0 = time.perf_counter()
    subprocess.run([java(), "-Xmx1g", "-cp", f"{jars}/*", "org.apache.kafka.tools.ProducerPerformance",
                    "--topic", TOPIC, "--num-records", str(records), "--record-size", str(size),
                    "--throughput", "-1", "--producer-props", *props], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def consume(bootstrap: str, partitions: int) -> tuple[float, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, check_crcs=True,
                             max_partition_fetch_bytes=8 * 1024 * 1024, fetch_max_bytes=16 * 1024 * 1024)
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    t0, n = time.perf_counter(), 0
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        for records in consumer.poll(timeout_ms=1000, max_records=100000).values():
            n += len(records)
    seconds = time.perf_counter() - t0
    consumer.close()
    return seconds, n


def peak_memory(bootstrap: str, out: Path, topics: str) -> tuple[float, int]:
    return peak_of([sys.executable, "-m", "analytics", "export", f"kafka://{bootstrap}", "--topics", topics,
                    "--out", str(out)])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--version", default="4.4.0")
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--single", action="store_true", help="one record per batch")
    p.add_argument("--rate-mib", type=float, default=4.0, help="the rate-limited run's --max-bytes-per-second, MiB")
    p.add_argument("--work", default=None)
    args = p.parse_args(argv)

    import pyarrow.parquet as pq

    from analytics import pipeline
    from analytics.spark.session import get_spark
    from tests.kafka_cluster import KafkaCluster, copy_log_dir, kafka_jars, resolve

    work = Path(args.work or tempfile.mkdtemp(prefix="segaudit-fetch-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tools = resolve("kafka-tools", "4.3.1")
    kafka_jars(args.version)
    cluster = KafkaCluster(args.version, work / "cluster", config={"log.segment.bytes": str(256 * 1024 * 1024)},
                           jvm_heap="2g")
    cluster.start()
    try:
        cluster.create_topic(TOPIC, partitions=args.partitions)
        produced = produce(cluster, tools, args.records, args.record_size, args.single)
        print(f"Kafka {args.version}, {args.records:,} records of {args.record_size} B in {args.partitions} partitions "
              f"({'one record per batch' if args.single else 'producer defaults, linger.ms=5'}), produced in "
              f"{produced:.1f} s")
        copy = copy_log_dir(cluster.node(1).log_dir, work / "copy")
        spark = get_spark(conf={"spark.ui.enabled": "false"})
        source = f"kafka://{cluster.bootstrap}"
        rows = []
        for name, paths, options in (
            ("protocol, first in the application", [source], {"topics": TOPIC}),
            ("protocol", [source], {"topics": TOPIC}),
            ("log dir copy", [str(copy / f"{TOPIC}-{i}") for i in range(args.partitions)], None),
        ):
            out = work / name.replace(" ", "-").replace(",", "")
            t0 = time.perf_counter()
            result = pipeline.export(spark, paths, str(out), cluster=options)
            seconds = time.perf_counter() - t0
            batches = result.rows["batches"]
            size = sum(pq.read_table(out / "segments", columns=["size_bytes"])["size_bytes"].to_pylist())
            rows.append((name, seconds, batches, size))
        seconds, n = consume(cluster.bootstrap, args.partitions)
        print(f"{'case':<38} {'seconds':>8} {'batches/s':>12} {'MB/s':>8}")
        for name, secs, batches, size in rows:
            print(f"{name:<38} {secs:>8.1f} {batches / secs:>12,.0f} {size / secs / 1e6:>8.1f}")
        print(f"{'KafkaConsumer (kafka-python), records':<38} {seconds:>8.1f} {n / seconds:>12,.0f} records/s "
              f"({rows[-1][3] / seconds / 1e6:.1f} MB/s)")

        rate = args.rate_mib * 1024 * 1024
        marks = {}

        def mark(message: str) -> None:  # the capture is done when the export says what it exports
            marks.setdefault("fetching", time.perf_counter())

        t0 = time.perf_counter()
        limited = pipeline.export(spark, [source], str(work / "limited"), progress=mark,
                                  cluster={"topics": TOPIC, "max_bytes_per_second": rate})
        done = time.perf_counter()
        fetching = done - marks["fetching"]
        print(f"rate limit {rate / 1e6:.2f} MB/s: {limited.input_bytes / 1e6:.1f} MB in {done - t0:.1f} s, "
              f"{fetching:.1f} s after the capture: {limited.input_bytes / fetching / 1e6:.2f} MB/s, "
              f"{limited.input_bytes / fetching / rate:.1%} of the limit")
        spark.stop()
        for topics, what in ((TOPIC, "the whole topic"),):
            secs, peak = peak_memory(cluster.bootstrap, work / "memory", topics)
            print(f"peak memory, fresh process at the default driver memory, {what}: {peak / 1024:,.0f} MiB "
                  f"({secs:.1f} s)")
    finally:
        cluster.close()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
