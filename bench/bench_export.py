"""Export throughput on this machine's cores, and peak memory against segment size.

    .venv/bin/python bench/bench_export.py [--small-batches N] [--large-mib N] [--partitions N] [--memory-mib N]

Cases, on the same files (written by the project's writer, in the page cache):
- ``segaudit export``: the Spark job (local[*]), the ``batches`` table with every side table, run
  twice in one application: the second run is the steady state, the first also pays for
  starting the Python workers;
- ``raw read``: the same bytes read in 8 MiB windows with no parsing, one process per core
  (what reading alone costs);
- ``kafka-python + pyarrow``: one process iterating kafka-python's ``MemoryRecords`` (CRC
  checked) and writing the same header columns to Parquet with pyarrow.

Memory: the export of a log dir holding one segment of ``--memory-mib`` MiB and of one of 64 MiB,
each in a fresh process at Spark's default driver memory; the peak is the sum of the resident
memory of the whole process tree (driver, JVM, Python workers), sampled every 100 ms.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_reader import write_large, write_small  # noqa: E402


def raw_read(path: str) -> int:
    n = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(8 << 20):
            n += len(chunk)
    return n


def kafka_python_export(paths: list[Path], out: Path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from kafka.record.memory_records import MemoryRecords

    schema = pa.schema([("file", pa.string()), ("base_offset", pa.int64()), ("last_offset", pa.int64()),
                        ("producer_id", pa.int64()), ("producer_epoch", pa.int16()), ("base_sequence", pa.int32()),
                        ("crc_valid", pa.bool_()), ("max_timestamp", pa.int64())])
    n = 0
    with pq.ParquetWriter(out, schema) as writer:
        for path in paths:
            cols = {name: [] for name in schema.names}
            records = MemoryRecords(path.read_bytes())
            while records.has_next():
                b = records.next_batch()
                cols["file"].append(str(path))
                cols["crc_valid"].append(b.validate_crc())
                cols["base_offset"].append(b.base_offset)
                cols["last_offset"].append(b.base_offset + b.last_offset_delta)
                cols["producer_id"].append(b.producer_id)
                cols["producer_epoch"].append(b.producer_epoch)
                cols["base_sequence"].append(b.base_sequence)
                cols["max_timestamp"].append(b.max_timestamp)
                n += 1
                if len(cols["file"]) >= 100_000:
                    writer.write_table(pa.table(cols, schema=schema))
                    cols = {name: [] for name in schema.names}
            writer.write_table(pa.table(cols, schema=schema))
    return n


def tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants, in KiB."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        p = int(entry)
        children.setdefault(int(fields["PPid"]), []).append(p)
        rss[p] = int(fields.get("VmRSS", "0 kB").split()[0])
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        stack.extend(children.get(p, []))
    return total


def peak_export_memory(log_dir: Path, out: Path) -> tuple[float, int]:
    return peak_of([sys.executable, "-m", "analytics", "export", str(log_dir), "--out", str(out)])


def peak_of(cmd: list[str]) -> tuple[float, int]:
    """Seconds and the peak resident memory (KiB) of the process tree of ``cmd``, sampled every 100 ms."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss_kib(proc.pid))
        time.sleep(0.1)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed")
    return time.perf_counter() - t0, peak


def spread(writer, root: Path, partitions: int, total, topic: str) -> list[Path]:
    paths = []
    for p in range(partitions):
        part = root / f"{topic}-{p}"
        part.mkdir(parents=True)
        path = part / "00000000000000000000.log"
        writer(path, total // partitions)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small-batches", type=int, default=2_000_000)
    ap.add_argument("--large-mib", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--memory-mib", type=int, default=1024)
    args = ap.parse_args(argv)

    from analytics.export import export
    from analytics.spark.session import get_spark

    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cases = [
            (f"single-record batches ({args.small_batches:,})", spread(write_small, tmp / "small", args.partitions, args.small_batches, "small")),
            (f"16 KiB batches ({args.large_mib} MiB)", spread(write_large, tmp / "large", args.partitions, args.large_mib, "large")),
        ]
        spark = get_spark()
        print(f"{'case':<34} {'method':<24} {'seconds':>8} {'batches/s':>12} {'MB/s':>8}")
        for name, paths in cases:
            size = sum(p.stat().st_size for p in paths)
            root = paths[0].parent.parent
            t0 = time.perf_counter()
            export(spark, [str(root)], str(tmp / "out-segaudit"))  # the first run also starts the Python workers
            t_first = time.perf_counter() - t0
            t0 = time.perf_counter()
            result = export(spark, [str(root)], str(tmp / "out-segaudit"))
            t_export = time.perf_counter() - t0
            batches = result.rows["batches"]
            t0 = time.perf_counter()
            with ProcessPoolExecutor(cores) as pool:
                assert sum(pool.map(raw_read, [str(p) for p in paths])) == size
            t_raw = time.perf_counter() - t0
            t0 = time.perf_counter()
            assert kafka_python_export(paths, tmp / "kp.parquet") == batches
            t_kp = time.perf_counter() - t0
            for method, t in (("segaudit export", t_export), ("  (first run of the app)", t_first),
                              (f"raw read ({cores} procs)", t_raw),
                              ("kafka-python + pyarrow", t_kp)):
                print(f"{name:<34} {method:<24} {t:>8.2f} {batches / t:>12,.0f} {size / t / 1e6:>8,.0f}")
        spark.stop()

        print("\npeak memory of the export process tree (driver + JVM + Python workers), default driver memory")
        for mib in (64, args.memory_mib):
            log_dir = tmp / f"mem-{mib}"
            spread(write_large, log_dir, 1, mib, "mem")
            seconds, peak = peak_export_memory(log_dir, tmp / f"out-mem-{mib}")
            print(f"  one {mib:>5} MiB segment: {peak / 1024:,.0f} MiB peak, {seconds:.1f} s")


if __name__ == "__main__":
    main()
