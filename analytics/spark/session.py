"""One way to get a SparkSession: local mode by default, a master URL or Spark Connect when asked.

Spark's console is quiet: no progress bar, and a local JVM writes its log and output to a file of its
own (:mod:`analytics.spark.jvmlog`), not the terminal. The Python workers run the
interpreter that runs segaudit (so the package and its dependencies are there), and the
``kafka-segments`` data source is registered.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

from analytics.spark import classdata, javacode, jvmlog, memory, objectstore
from analytics.tuning import INTERPRETED_BYTES, QUICK_START_BYTES

LOG4J = Path(__file__).with_name("log4j2.properties")


class JavaMissing(RuntimeError):
    """No Java 17+ for Spark; the message says how to get it."""


def check_java() -> tuple[str, str]:
    """The ``java`` Spark's launcher will run and what its ``-version`` says; :class:`JavaMissing`
    when there is none, or it is older than 17."""
    java = shutil.which("java")
    home = os.environ.get("JAVA_HOME")
    if home:  # Spark's launcher takes $JAVA_HOME/bin/java when JAVA_HOME is set, whatever PATH holds
        java = os.path.join(home, "bin", "java")
        if not os.access(java, os.X_OK):
            raise JavaMissing(f"JAVA_HOME is {home}, which holds no bin/java: point it at a Java 17+ "
                              "installation or unset it (On Debian: sudo apt-get install -y openjdk-17-jre-headless)")
    if not java:
        raise JavaMissing("Java 17+ is required (Spark runs on the JVM) and no 'java' was found. "
                          "On Debian: sudo apt-get install -y openjdk-17-jre-headless")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    version = out.split('"')[1] if '"' in out else ""
    major = int(version.split(".")[0]) if version[:1].isdigit() else 0
    major = 8 if major == 1 else major
    if major < 17:
        raise JavaMissing(f"Java 17+ is required, found: {out.splitlines()[0] if out else 'unknown'}. "
                          "On Debian: sudo apt-get install -y openjdk-17-jre-headless")
    return java, out


# The audit's verdict projection generates methods above HotSpot's 8,000-byte JIT limit; left
# interpreted they cost more than the windows (10M batches: 65 s instead of 42 s to classify).
JIT_OPTIONS = "-XX:-DontCompileHugeMethods"

# Up to QUICK_START_BYTES of input (analytics.tuning) a local session runs the quick compiler (C1)
# alone. C1 alone gets HotSpot's code cache for one compiler, 48 MiB, which a whole `segaudit run` fills
# ("CodeCache is full. Compiler has been disabled": the rest of the run interpreted); C1 and C2
# together get 240 MiB, kept here.
QUICK_START_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"

# A JVM that only coordinates or runs briefly on small data (a standalone cluster's master and
# worker; in the tests, Kafka's brokers, tools and clients and a Spark Connect server): C1 alone and
# the serial collector, about half the CPU of HotSpot's defaults (docs/benchmarks.md). Sessions
# keep G1: the sample's cold `run` took as long with the serial collector.
SMALL_WORK_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def jit_options(input_bytes: int | None) -> str:
    """The JIT options of a local session that will read about ``input_bytes`` (None: unknown)."""
    if input_bytes is not None and input_bytes <= QUICK_START_BYTES:
        return QUICK_START_OPTIONS
    return JIT_OPTIONS


# Up to INTERPRETED_BYTES of input (analytics.tuning: the measurement) a new local session evaluates
# queries interpreted, without generated code.
INTERPRETED_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


SCAN_SPLITS = "spark.sql.files.minPartitionNum"


# Adaptive execution plans a query stage by stage: it runs each shuffle's map side as a job of its
# own, re-optimizes what is left with the sizes it saw and describes every new plan to the listeners.
# Over a tiny input that costs more than it finds: it coalesces the shuffles to about one partition
# per core, which a fixed partition count per core gives at once (a warm session's audit of a small
# scenario: 12% less JVM CPU without it, docs/benchmarks.md). Its scans get a task per core too,
# not the four a larger input keeps (:func:`get_spark`): each task of a few kilobytes costs its
# serialization and a Hadoop configuration of its own (the sample's warm audit: 0.7 s less).
def single_plan_conf(cores: int) -> dict[str, str]:
    """Each query planned once, its scans and shuffles ``cores`` tasks wide.

    >>> single_plan_conf(2)
    {'spark.sql.adaptive.enabled': 'false', 'spark.sql.shuffle.partitions': '2', 'spark.sql.files.minPartitionNum': '2'}
    """
    width = str(max(cores, 1))
    return {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": width, SCAN_SPLITS: width}


def small_queries(spark):
    """The ``with`` block's queries, over a few rows each, planned once as one job each
    (:func:`single_plan_conf` as wide as ``spark``'s cores) instead of a job per shuffle."""
    return settings(spark, single_plan_conf(default_parallelism(spark)))


@contextmanager
def settings(spark, conf: dict[str, str]):
    """``conf`` set on ``spark``'s runtime configuration for the ``with`` block, then each key put back
    as it was (unset when it was not set)."""
    before = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def evaluation_conf(input_bytes: int | None, cores: int = 1) -> dict[str, str]:
    """The Spark configuration of how a new local session of ``cores`` cores that will read about
    ``input_bytes`` (None: unknown) evaluates queries: interpreted and planned once up to
    ``INTERPRETED_BYTES``, else Spark's defaults.

    >>> evaluation_conf(0, 2) == INTERPRETED_CONF | single_plan_conf(2)
    True
    >>> evaluation_conf(None), evaluation_conf(INTERPRETED_BYTES + 1)
    ({}, {})
    """
    if input_bytes is None or input_bytes > INTERPRETED_BYTES:
        return {}
    return INTERPRETED_CONF | single_plan_conf(cores)


def local_cores(master: str) -> int:
    """The cores of a local master URL (``local``, ``local[4]``, ``local[*]``, ``local[4,2]``).

    >>> local_cores("local"), local_cores("local[3]"), local_cores("local[2,4]"), local_cores("local[*]") > 0
    (1, 3, 2, True)
    """
    inside = master.partition("[")[2].partition("]")[0].split(",")[0]
    if not inside:
        return 1
    return os.cpu_count() or 1 if inside == "*" else int(inside)


# PySpark 4 records the Python call site of every DataFrame function it is handed, for the query
# context of an error message: five or so calls into the JVM for each. The audit builds its plans
# from some 800 such calls, and spent two thirds of its 12,800 Py4J round trips on them (a warm
# session's audit of a small scenario: 10.3-11.2 s with them, 8.4-9.5 s without). An error then names
# the expression that failed but not the Python line that built it, which segaudit's one-line
# errors never showed (--debug still prints the traceback). Over Spark Connect the setting is the
# server's (static there), and the client's call sites cost no round trip.
NO_CALL_SITES = ("spark.python.sql.dataFrameDebugging.enabled", "false")

# The audit's join back (``analytics.audit.steps.join_back``) hashes both sides by (history,
# file_id), a prefix of its join key. Spark takes that as co-partitioning only with this setting
# false; with its default (true) it hashes both sides on the whole key instead: the same verdicts
# and as many shuffles, but every write task then holds pieces of every partition's history (200k
# batches in 3 partitions: each file of batch_verdicts held all 3 and all 9 segments, instead of
# 1-2 and 1-4) and classify took about 15% longer. A hint, not a requirement: sessions built here
# get it; a caller's own session keeps what it has (the audit neither sets nor checks it).
CO_PARTITION_ON_KEY_PREFIX = ("spark.sql.requireAllClusterKeysForCoPartition", "false")


def get_spark(master: str | None = None, *, remote: str | None = None, app_name: str = "segaudit", conf: dict | None = None,
              input_bytes: int | None = None, incremental: bool = False, storage: Iterable[str] = ()):
    """The active session if there is one, else a new one (``local[*]`` unless told otherwise).
    ``input_bytes``, the size of what the session will read when known, picks a new local JVM's
    compiler (:func:`jit_options`) and, when it is the whole of the input (not of an ``incremental``
    run, which reads the new segments and joins them with the tables of the whole log), how the
    session evaluates queries (:func:`evaluation_conf`). ``storage``, the paths the command reads and
    writes (inputs, OUT), adds the S3 connector when one is on S3 (:func:`objectstore.spark_conf`,
    under ``conf``: the user's settings win); a Spark Connect server brings its own. A new classic
    session gets segaudit's jar in ``spark.jars`` (:func:`javacode.session_conf`); under spark-submit
    the connector's jars are added to the submitted ``spark.jars`` (``--jars``, segaudit's jar among
    them), which the session would otherwise ship instead of them (:func:`joined_jars`). A new JVM of a
    local master (none, ``local``, ``local[...]``) gets a share of the machine's memory as its heap
    unless the user set it (:func:`memory.driver_memory_conf`); under spark-submit, over Spark Connect
    and on a cluster manager's master the heap stays theirs."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and not remote and master is None:
        _register(active)
        return active
    # Under spark-submit the JVM is already running with the submitted master and options.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    archive = classdata.Archive()
    if not remote:
        java = check_java()
        if not submitted:
            archive = class_archive(java)
    # Python workers must run this interpreter, which has the package and its dependencies.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    options: dict[str, str] = {}
    if remote:
        builder = builder.remote(remote)
    else:
        if master or not submitted:
            builder = builder.master(master or "local[*]")
        if not submitted:
            local = master is None or master.startswith("local")
            jvm = f"-Dlog4j.configurationFile={LOG4J.as_uri()} {jit_options(input_bytes if local else None)}"
            options["spark.driver.extraJavaOptions"] = f"{jvm} {archive.options}".strip()
            options["spark.executor.extraJavaOptions"] = jvm
            # To merge a sort that spilled many times, Spark opens every spill file at once; with read-ahead
            # each reader holds two 1 MiB buffers, which alone exhausted a 1 GiB local-mode driver auditing
            # 10M batches. Without it the same audit completes (docs/benchmarks.md).
            options["spark.unsafe.sorter.spill.read.ahead.enabled"] = "false"
            tiny = input_bytes if local and not incremental else None
            cores = local_cores(master or "local[*]") if local else 1
            options |= evaluation_conf(tiny, cores)
            # The heap of the one JVM that plans and runs the tasks: a share of the machine unless the
            # user set it (a --conf, PYSPARK_SUBMIT_ARGS, spark-defaults.conf, SPARK_DRIVER_MEMORY).
            options |= memory.driver_memory_conf(master, conf)
        options |= {"spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC"}
        options |= dict([NO_CALL_SITES])  # a Connect server holds it as a static setting: not asked there
        connector = objectstore.spark_conf(storage)
        if submitted and "spark.jars" in connector:  # added to spark-submit's --jars, which it would replace
            missing = next((name for name in objectstore.DRIVER_CLASSES if not submitted_loads(name)), None)
            if missing:
                raise objectstore.ConnectorUnavailable(
                    "a path is on S3 and this spark-submit put no S3 connector on the driver's class path "
                    f"({missing} not found): submit with $(python -m analytics.spark.submit --s3)")
            connector["spark.jars"] = joined_jars(submitted_setting("spark.jars"), connector["spark.jars"])
        options |= connector
        if not submitted:  # segaudit's jar (the replay's window function); under spark-submit, its --jars
            options |= javacode.session_conf(options.get("spark.jars"))
    options |= dict([CO_PARTITION_ON_KEY_PREFIX])
    options |= {key: str(value) for key, value in (conf or {}).items()}
    builder = builder.config(map=options)
    if not remote and not submitted:
        _launch_jvm(app_name, master or "local[*]", options)
    spark = builder.getOrCreate()
    if remote:
        _remote_sessions.append(spark)
    if not remote and spark.conf.get(SCAN_SPLITS, None) is None:
        # Spark splits a scan into about one task per core below 128 MiB a task; with so few, the
        # last task of a stage runs alone. Four per core keep both cores of a small machine busy
        # to the end (10M batches, 2 cores: the audit ~8 s faster); big scans keep 128 MiB tasks.
        spark.conf.set(SCAN_SPLITS, str(4 * spark.sparkContext.defaultParallelism))
    level = os.environ.get("SEGAUDIT_SPARK_LOG_LEVEL")
    if level and not remote:
        spark.sparkContext.setLogLevel(level)
    _register(spark)
    if not remote:
        objectstore.warm(spark, storage)
    return spark


_remote_sessions: list = []


def submitted_setting(key: str) -> str | None:
    """A setting of the application spark-submit started (``--jars`` is ``spark.jars``, ``--conf``),
    read from its JVM before the session is made: the new session's configuration starts from these,
    and a setting given to the session's builder replaces the submitted one."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # under spark-submit: the gateway of the JVM it started
    return SparkConf().get(key)


def submitted_loads(name: str) -> bool:
    """Whether the JVM spark-submit started loads the class ``name`` (its ``--jars`` and class path,
    the loader it runs the application with): jars a session adds later reach the executors, not the
    classes the driver needs to make the session."""
    from pyspark import SparkContext

    SparkContext._ensure_initialized()
    lang = SparkContext._jvm.java.lang
    try:
        lang.Class.forName(name, False, lang.Thread.currentThread().getContextClassLoader())
    except Exception:  # py4j's error for the JVM's ClassNotFoundException
        return False
    return True


def joined_jars(*lists: str | None) -> str:
    """Comma-separated jar lists (``spark.jars``) as one, in order, each file name once, the first
    kept: Spark ships a jar to the executors under its file name (``spark://<driver>/jars/<name>``),
    so a second of the same name would never reach them.

    >>> joined_jars("file:///opt/segaudit.jar,file:///c/hadoop-aws.jar", None, "/c/hadoop-aws.jar,/c/s3.jar")
    'file:///opt/segaudit.jar,file:///c/hadoop-aws.jar,/c/s3.jar'
    """
    jars: dict[str, str] = {}
    for listed in lists:
        for jar in (listed or "").split(","):
            if jar.strip():
                jars.setdefault(jar.strip().rstrip("/").rpartition("/")[2], jar.strip())
    return ",".join(jars.values())


def _launch_jvm(app_name: str, master: str, options: dict[str, str]) -> None:
    """Start the JVM of a local session, unless one runs, as the session builder would, but with its
    output in its log file (:mod:`analytics.spark.jvmlog`): handed to the new process, so no stream
    of this process is touched while other threads write to it."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    with SparkContext._lock:
        if SparkContext._gateway:
            return
        conf = SparkConf().setAppName(app_name).setMaster(master).setAll(list(options.items()))
        SparkContext._gateway = launch_gateway(conf, popen_kwargs=jvmlog.popen_kwargs())
        SparkContext._jvm = SparkContext._gateway.jvm


def class_archive(java: tuple[str, str] | None = None) -> classdata.Archive:
    """The class-data archive options of a local JVM that ``java`` (:func:`check_java`'s answer,
    asked when not given) will start with Spark's jars; none yet: its writer starts
    (:func:`classdata.archive_for`)."""
    return classdata.archive_for(*(java or check_java()), spark_jars())


def spark_jars() -> Path:
    """The jars on the class path of the JVM a session starts (PySpark's own, or ``$SPARK_HOME``'s)."""
    return javacode.installed_jars()


def interrupt_remote() -> None:
    """Interrupt every operation the Spark Connect sessions of this process are running (the server
    runs them: a client that stops waiting does not stop them)."""
    for spark in _remote_sessions:
        try:
            spark.interruptAll()
        except Exception:  # noqa: BLE001 - a server gone has nothing left to interrupt
            pass


def default_parallelism(spark) -> int:
    """The cores Spark spreads a job over: the context's default parallelism; over Spark Connect,
    where the client has no context, ``spark.default.parallelism`` when the server sets it, else 8."""
    if _is_connect(spark):
        return int(spark.conf.get("spark.default.parallelism", None) or 8)
    return spark.sparkContext.defaultParallelism


def _is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect client session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _register(spark) -> None:
    from analytics.spark.source import KafkaSegmentsDataSource

    spark.dataSource.register(KafkaSegmentsDataSource)
