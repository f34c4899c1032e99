"""Class-data sharing for the JVM of a session this process starts: a new JVM maps the classes
of Spark that another JVM loaded, parsed and verified from an archive, instead of loading them again
(the sample's cold ``segaudit run``: about 5 s less of some 50; docs/benchmarks.md).

The archive is HotSpot's own (a dynamic CDS archive, JDK 13+), kept in ``$SEGAUDIT_CACHE/jvm``
(default ``~/.cache/segaudit/jvm``) under a key of the Java runtime and Spark's jars: another Java or
another Spark gets another archive. How one comes to be:

1. A session finds none: it claims the key (``<key>.lock``, created exclusively), starts without,
   and leaves a writer in the background (``python -m analytics.spark.classdata KEY``, niced): a JVM
   of its own runs a small job through the operators an audit uses and exits, writing the classes
   it loaded to ``<key>.part`` (``-XX:ArchiveClassesAtExit``). A JVM writing an archive runs slower
   (the sample's run: 56-70 s instead of 50 s), so a command's own JVM never writes one.
2. The writer checks the part with a JVM that must map it (``-Xshare:on -XX:+VerifySharedSpaces``,
   the class path it was written for) and moves it into place, then frees the claim. A part that
   fails is deleted. A claim whose writer is gone (killed: a torn archive crashes the JVM that maps
   it, so none is ever moved into place unchecked) is settled the same way by the next session.
3. Every session then maps ``<key>.jsa`` (``-XX:SharedArchiveFile``); a JVM whose class path
   differs from the archive's ignores it.

The JVM's CDS logging is off: its notes on the classes it leaves out are no user's business.
``SEGAUDIT_JVM_ARCHIVE=off`` turns all of it off; a cache that cannot be written means no archive,
never a failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from analytics.processes import alive

QUIET = "-Xlog:cds*=off"
# A claim with no pid yet this old: its writer never got a JVM running.
STALE_CLAIM_SECONDS = 600
SWITCH = "SEGAUDIT_JVM_ARCHIVE"


@dataclass(frozen=True)
class Archive:
    """The JVM options of a new session: the archive to map (none: nothing)."""
    options: str = ""


def folder() -> Path:
    return Path(os.environ.get("SEGAUDIT_CACHE") or Path.home() / ".cache" / "segaudit") / "jvm"


def archive_for(java: str, java_version: str, spark_jars: Path, *, write: bool = True) -> Archive:
    """The archive options of a new session whose JVM is ``java`` (reporting ``java_version``) with
    ``spark_jars`` on its class path; without an archive, a writer is left in the background
    (``write``) unless one is at it."""
    if os.environ.get(SWITCH, "").strip().lower() in ("off", "0", "false", "no"):
        return Archive()
    try:
        where = folder()
        if any(c.isspace() or c in "'\"\\" for c in str(where)):
            return Archive()  # a path Spark's option splitting would cut
        where.mkdir(parents=True, exist_ok=True)
        key = _key(java, java_version, spark_jars)
        done, part, claim = _paths(key)
        _settle(java, done, part, claim)
        if done.is_file():
            return Archive(f"-XX:SharedArchiveFile={done} {QUIET}")
        if write:
            os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            subprocess.Popen([sys.executable, "-m", __name__, key, java], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:  # FileExistsError: another writer is at it
        pass
    return Archive()


def write_archive(key: str, java: str) -> bool:
    """The writer: a JVM runs a small job and exits, writing the classes it loaded; the archive is
    checked and moved into place. True when it is there."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    done, part, claim = _paths(key)
    try:
        spark = (SparkSession.builder.master("local[1]").appName("segaudit-class-archive")
                 .config("spark.driver.extraJavaOptions", f"-XX:ArchiveClassesAtExit={part} {QUIET}")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1").getOrCreate())
        jvm = spark._jvm
        class_path = jvm.System.getProperty("java.class.path")
        claim.write_text(json.dumps({"pid": int(jvm.ProcessHandle.current().pid()), "class_path": class_path}))
    except BaseException:
        claim.unlink(missing_ok=True)  # no JVM to write it: the key is free again
        raise
    with tempfile.TemporaryDirectory() as scratch:  # the operators of an audit: scans, windows, joins, writes
        rows = spark.range(1000).select((F.col("id") % 7).alias("k"), F.col("id"), F.lit("x").alias("s"))
        rows.write.partitionBy("k").parquet(f"{scratch}/t")
        back = spark.read.parquet(f"{scratch}/t")
        window = Window.partitionBy("k").orderBy("id")
        ordered = back.withColumn("prev", F.lag("id").over(window)).withColumn("run", F.max("id").over(window))
        joined = ordered.join(F.broadcast(back.groupBy("k").agg(F.count("*").alias("n"))), "k")
        joined.localCheckpoint().where(F.col("prev").isNotNull()).write.parquet(f"{scratch}/u")
        joined.groupBy("s").agg(F.sum("n")).collect()
    process = spark.sparkContext._gateway.proc
    spark.stop()
    process.stdin.close()  # the JVM exits at its stdin's end, and writes the archive
    process.wait(timeout=600)
    _place(java, done, part, claim, class_path)
    return done.is_file()


def wait_for_writers(timeout: float) -> None:
    """Wait up to ``timeout`` seconds for the archives being written (their claims) to be done."""
    deadline = time.monotonic() + timeout
    while any(folder().glob("*.lock")) and time.monotonic() < deadline:
        time.sleep(0.2)


def _paths(key: str) -> tuple[Path, Path, Path]:
    """The archive, the part a writer writes, and the claim."""
    return tuple(folder() / f"{key}.{ext}" for ext in ("jsa", "part", "lock"))


def _key(java: str, java_version: str, spark_jars: Path) -> str:
    jars = sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(spark_jars))
    # not the notes of JAVA_TOOL_OPTIONS or _JAVA_OPTIONS, which say nothing of the runtime
    runtime = [line for line in java_version.splitlines() if not line.startswith("Picked up ")]
    return hashlib.sha256(repr((os.path.realpath(java), runtime, str(spark_jars), jars)).encode()).hexdigest()[:20]


def _settle(java: str, done: Path, part: Path, claim: Path) -> None:
    """Move a finished part into place once its JVM is gone (checked first), and free the claim."""
    try:
        text = claim.read_text()
        written = claim.stat().st_mtime
    except FileNotFoundError:
        return
    try:
        record = json.loads(text) if text.strip() else {}
    except ValueError:
        record = {}
    pid = record.get("pid")
    if pid is None and time.time() - written < STALE_CLAIM_SECONDS:
        return  # its session is starting
    if pid is not None and alive(pid):
        return
    _place(java, done, part, claim, record.get("class_path") if pid is not None else None)


def _place(java: str, done: Path, part: Path, claim: Path, class_path: str | None) -> None:
    """Move the part into place if a JVM maps it (with ``class_path``, the one it was written for;
    None: its writer never ran one), then delete what is left of it and free the claim."""
    if class_path is not None and not done.is_file() and part.is_file() and _maps(java, part, class_path):
        os.replace(part, done)
    part.unlink(missing_ok=True)
    claim.unlink(missing_ok=True)


def _maps(java: str, part: Path, class_path: str) -> bool:
    """Whether a JVM maps ``part`` whole and runs with it."""
    try:
        return subprocess.run([java, "-Xshare:on", "-XX:+VerifySharedSpaces", f"-XX:SharedArchiveFile={part}", QUIET,
                               "-cp", class_path, "-version"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


if __name__ == "__main__":  # the writer a session leaves in the background
    os.nice(10)
    sys.exit(0 if write_archive(sys.argv[1], sys.argv[2]) else 1)
