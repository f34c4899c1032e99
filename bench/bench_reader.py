"""Header-level read throughput (CRC included): segaudit's reader against kafka-python, same bytes.

    .venv/bin/python bench/bench_reader.py [--small-batches N] [--large-mib N] [--corpus DIR] [--repeat N]

Each case is a real segment file written by the project's writer (or the real broker files of
the corpus). Both readers walk every batch, verify its CRC and read its header fields; neither
decodes records. kafka-python (3.0.12, its CRC-32C from the same ``crc32c`` C package) is the
baseline; the ratio column is segaudit's speed over it. Best of ``--repeat`` runs, one core.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analytics.kafka.reader import LocalFile, SegmentScanner  # noqa: E402
from analytics.kafka.writer import RecordSpec, build_batch  # noqa: E402


def segaudit_scan(paths: list[Path]) -> int:
    n = 0
    for path in paths:
        with LocalFile(path) as source:
            scanner = SegmentScanner(source, topic="t", partition=0, file=str(path))
            for chunk in scanner:
                n += chunk.batches.num_rows
            if scanner.errors:
                raise SystemExit(f"{path}: unexpected errors {scanner.errors[:3]}")
    return n


def kafka_python_scan(paths: list[Path]) -> int:
    from kafka.record.memory_records import MemoryRecords

    n = 0
    for path in paths:
        records = MemoryRecords(path.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            if not batch.validate_crc():
                raise SystemExit(f"{path}: kafka-python finds a bad CRC")
            if batch.magic == 2:  # the header fields the audit needs
                (batch.base_offset, batch.last_offset_delta, batch.producer_id, batch.producer_epoch,
                 batch.base_sequence, batch.is_transactional, batch.is_control_batch, batch.max_timestamp)
            else:
                batch.base_offset
            n += 1
    return n


def best_of(fn, paths, repeat: int) -> tuple[float, int]:
    best = float("inf")
    count = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        count = fn(paths)
        best = min(best, time.perf_counter() - t0)
    return best, count


def write_small(path: Path, n: int) -> None:
    """Single-record idempotent batches, the shape of a low-latency producer (linger.ms=0)."""
    with open(path, "wb") as f:
        for i in range(n):
            f.write(
                build_batch(
                    i,
                    [RecordSpec(b"key-%d" % (i % 1000), b"v" * 20, 1_700_000_000_000 + i)],
                    producer_id=1000 + i % 8,
                    producer_epoch=0,
                    base_sequence=i // 8,
                    partition_leader_epoch=3,
                )
            )


def write_large(path: Path, mib: int) -> None:
    """16 KiB batches (the producer's default batch.size), incompressible values."""
    payload = os.urandom(16 * 1024 - 200)
    offset = 0
    with open(path, "wb") as f:
        for i in range(mib * 64):
            f.write(build_batch(offset, [RecordSpec(b"k", payload, 1_700_000_000_000 + i)], producer_id=7, producer_epoch=0, base_sequence=i))
            offset += 1


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small-batches", type=int, default=500_000)
    ap.add_argument("--large-mib", type=int, default=512)
    ap.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared" / "corpus")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        small = Path(tmp) / "small-0" / "00000000000000000000.log"
        small.parent.mkdir()
        write_small(small, args.small_batches)
        cases.append((f"single-record batches ({args.small_batches:,})", [small]))
        large = Path(tmp) / "large-0" / "00000000000000000000.log"
        large.parent.mkdir()
        write_large(large, args.large_mib)
        cases.append((f"16 KiB batches ({args.large_mib} MiB)", [large]))
        if args.corpus.is_dir():
            cases.append(("corpus (241 real segments)", sorted(args.corpus.rglob("*.log"))))

        print(f"{'case':<36} {'reader':<13} {'batches/s':>12} {'MB/s':>9} {'ratio':>7}")
        for name, paths in cases:
            size = sum(p.stat().st_size for p in paths)
            base_t, base_n = best_of(kafka_python_scan, paths, args.repeat)
            ours_t, ours_n = best_of(segaudit_scan, paths, args.repeat)
            if base_n != ours_n:
                raise SystemExit(f"{name}: kafka-python saw {base_n} batches, segaudit {ours_n}")
            for label, t in (("kafka-python", base_t), ("segaudit", ours_t)):
                print(
                    f"{name:<36} {label:<13} {ours_n / t:>12,.0f} {size / t / 1e6:>9,.0f} {base_t / t:>6.1f}x"
                )


if __name__ == "__main__":
    main()
