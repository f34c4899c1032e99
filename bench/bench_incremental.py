"""A nightly audit continued (``--incremental``) against the same audit done in full.

    .venv/bin/python bench/bench_incremental.py [--batches N] [--share 0.01] [--work DIR]
                                                [--driver-memory 1g] [--baseline-conf KEY=VALUE ...]

A ``clean`` log dir of about N batches (the generator's, cached in ``--work``) is seen on two
nights. The first night lacks the newest ``--share`` of every partition: the newest segments are
missing and the active one is cut at a batch boundary. The second night has them again (new
segments, and an active segment that grew). Cases, each a fresh ``segaudit`` process (JVM start
included), each command timed alone, until every process it started is gone (its JVM's shutdown
included, which the next command would otherwise share the machine with):

- night 1: ``export`` and ``audit`` in full (the previous audit);
- night 2, ``--incremental``: ``export --incremental`` (reads only the new and grown segments) and
  ``audit --incremental`` (replays only the batches after the state night 1 left);
- night 2, the baseline: ``export`` and ``audit`` in full, into another OUT;
- with ``--baseline-conf``, night 2's incremental commands again with those Spark options, on a
  copy of night 1's OUT (a change measured side by side with the setting it replaces).

The incremental run's tables are then checked against the full run's, table by table (row counts
and an order-free hash of every row, with pyarrow), and the cost of the incremental run is printed
as a share of the full one. The log dir of night 2 is the generator's own; night 1 is a copy of it
whose unchanged files are hard links.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analytics.processes import group_alive  # noqa: E402

TABLES = ("batches", "segments", "parse_errors", "batch_verdicts", "anomalies", "producer_sessions", "transactions",
          "snapshot_checks", "producer_state", "partition_state", "producer_files")


def logdir_of(work: Path, batches: int) -> Path:
    scale = math.ceil(batches / 60)
    logdir = work / f"clean-x{scale}"
    if not (work / f"{logdir.name}.truth" / "scenario.json").exists():
        shutil.rmtree(logdir, ignore_errors=True)
        print(f"generating {logdir} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "analytics", "generate", str(logdir), "--scenario", "clean",
                        "--scale", str(scale)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return logdir


def boundaries(path: Path) -> list[int]:
    """The file positions where the segment's batches start, from their headers alone."""
    starts, size = [], path.stat().st_size
    with open(path, "rb") as f:
        pos = 0
        while pos + 12 <= size:
            f.seek(pos + 8)
            length = struct.unpack(">i", f.read(4))[0]
            if length <= 0 or pos + 12 + length > size:
                break
            starts.append(pos)
            pos += 12 + length
    return starts


def first_night(full: Path, night: Path, share: float) -> int:
    """``night``: ``full`` without the newest ``share`` of each partition's bytes (whole newest
    segments, then a cut inside the active one at a batch boundary); returns the files it changed."""
    shutil.rmtree(night, ignore_errors=True)
    shutil.copytree(full, night, copy_function=os.link)
    changed = 0
    for partition in sorted(p for p in night.iterdir() if p.is_dir()):
        logs = sorted(partition.glob("*.log"))
        cut = share * sum(p.stat().st_size for p in logs)
        while logs and cut > 0:
            last = logs[-1]
            size = last.stat().st_size
            changed += 1
            if size <= cut and len(logs) > 1:
                last.unlink()
                logs.pop()
                cut -= size
                continue
            keep = max([b for b in boundaries(last) if b <= size - cut] or [0])
            data = last.read_bytes()[:keep]
            last.unlink()  # a hard link: write a file of its own
            last.write_bytes(data)
            cut = 0
    return changed


def segaudit(args: list[str], memory: str) -> float:
    """Seconds until the command and every process it started are gone: its JVM outlives the Python
    process by a second or more (Spark's shutdown deletes its spill and shuffle files), and the next
    command must not run beside that."""
    started = time.monotonic()
    command = subprocess.Popen([sys.executable, "-m", "analytics", *args, "--conf", f"spark.driver.memory={memory}"],
                               cwd=ROOT, stdout=subprocess.DEVNULL, start_new_session=True)
    code = command.wait()
    while group_alive(command.pid):  # the command's session: its JVM and Python workers
        time.sleep(0.02)
    if code:
        raise SystemExit(f"segaudit {' '.join(args)}: exit {code}")
    return time.monotonic() - started


def table_digest(out: Path, table: str) -> tuple[int, int]:
    """(rows, an order-free hash of every row) of a table, read with pyarrow batch by batch."""
    import pyarrow.dataset as ds
    import zlib

    folder = out / table
    if not folder.is_dir():
        return (0, 0)
    dataset = ds.dataset(folder, format="parquet", partitioning="hive", ignore_prefixes=[".", "_"])
    columns = sorted(dataset.schema.names)
    rows, digest = 0, 0
    for batch in dataset.to_batches(columns=columns):
        for row in batch.to_pylist():
            digest = (digest + zlib.crc32(repr([row[c] for c in columns]).encode())) % (1 << 61)
        rows += batch.num_rows
    return rows, digest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=10_000_000)
    ap.add_argument("--share", type=float, default=0.01, help="the share of each partition new on night 2")
    ap.add_argument("--work", type=Path, default=Path("/tmp/segaudit-bench"))
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument("--baseline-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="also run night 2's incremental commands with this Spark option (repeatable), on a copy "
                         "of night 1's OUT: a baseline side by side")
    ap.add_argument("--skip-digest", action="store_true", help="do not compare the tables (large logs: slow)")
    opts = ap.parse_args()
    opts.work.mkdir(parents=True, exist_ok=True)
    full_logs = logdir_of(opts.work, opts.batches)
    night = opts.work / "night1" / full_logs.name  # same name: the tables' paths differ only by the parent
    changed = first_night(full_logs, night, opts.share)
    out, baseline = opts.work / "incremental.out", opts.work / "full.out"
    for folder in (out, baseline):
        shutil.rmtree(folder, ignore_errors=True)
    # the log dir must keep its path between nights: night 1 is moved into place, then night 2
    live = opts.work / "live" / full_logs.name
    shutil.rmtree(live.parent, ignore_errors=True)
    live.parent.mkdir(parents=True)
    night.rename(live)
    mem = opts.driver_memory
    times = {"night 1 export": segaudit(["export", str(live), "--out", str(out)], mem),
             "night 1 audit": segaudit(["audit", str(out), "--no-history"], mem)}
    other = opts.work / "incremental-baseline.out"
    shutil.rmtree(other, ignore_errors=True)
    if opts.baseline_conf:
        shutil.copytree(out, other)
    shutil.rmtree(live)
    shutil.copytree(full_logs, live, copy_function=os.link)
    times["night 2 export --incremental"] = segaudit(["export", str(live), "--out", str(out), "--incremental"], mem)
    times["night 2 audit --incremental"] = segaudit(["audit", str(out), "--no-history", "--incremental"], mem)
    if opts.baseline_conf:
        confs = [arg for conf in opts.baseline_conf for arg in ("--conf", conf)]
        times["baseline export --incremental"] = segaudit(["export", str(live), "--out", str(other), "--incremental", *confs], mem)
        times["baseline audit --incremental"] = segaudit(["audit", str(other), "--no-history", "--incremental", *confs], mem)
    times["night 2 export (full)"] = segaudit(["export", str(live), "--out", str(baseline)], mem)
    times["night 2 audit (full)"] = segaudit(["audit", str(baseline), "--no-history"], mem)
    manifest = json.loads((out / "_export.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    batches = sum(summary["verdicts"].values())
    print(f"log: {full_logs} ({batches:,} batches, {manifest['files']} segment files; night 1 lacked "
          f"{opts.share:.1%} of each partition: {changed} files removed or cut)")
    print(f"incremental export read {manifest['incremental']['files_read']} files, kept "
          f"{manifest['incremental']['files_kept']}; the audit continued {summary['incremental']['continued_histories']} "
          f"histories and scanned {summary['incremental'].get('files_read')} files")
    for name, seconds in times.items():
        print(f"  {name:32s} {seconds:8.1f} s")
    inc = times["night 2 export --incremental"] + times["night 2 audit --incremental"]
    full = times["night 2 export (full)"] + times["night 2 audit (full)"]
    print(f"night 2: incremental {inc:.1f} s, full {full:.1f} s: {inc / full:.1%} of the full run "
          f"(audit alone {times['night 2 audit --incremental'] / times['night 2 audit (full)']:.1%})")
    if opts.baseline_conf:
        base = times["baseline export --incremental"] + times["baseline audit --incremental"]
        print(f"baseline ({' '.join(opts.baseline_conf)}): incremental {base:.1f} s: {base / full:.1%} of the full run")
    if not opts.skip_digest:
        same = {t: table_digest(out, t) == table_digest(baseline, t) for t in TABLES}
        print("tables equal to the full run's: " + ", ".join(f"{t} {'yes' if ok else 'NO'}" for t, ok in same.items()))


if __name__ == "__main__":
    main()
