"""The heap of a new local session's JVM: a share of the machine, as DuckDB sizes itself, unless the
user set it.

Spark gives a driver 1 GiB unless told (``spark.driver.memory``), and in local mode that one heap
is also the executor's: every sort buffer of the audit's windows. At 1 GiB those sorts spill (a
4M-batch audit: 117 s against 106 s with an 8 GiB driver, issue 46; the 10M-batch join back spilled
4.2 GB, ``docs/benchmarks.md``), while the machine that runs it usually has many times more. DuckDB
takes 80% of physical memory by default, for one process that does everything; a local Spark
session does not: see :data:`DRIVER_MEMORY_SHARE`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from analytics.tuning import DRIVER_MEMORY_CAP_MIB, DRIVER_MEMORY_SHARE, MIB

# Spark's own default heap (its launcher's ``-Xmx1g``). A share below it is not given: a machine of
# 2 GiB or less keeps what Spark gives, so no session gets less than it did.
SPARK_DEFAULT_DRIVER_MIB = 1024

DRIVER_MEMORY = "spark.driver.memory"
# What Spark's launcher reads when ``spark.driver.memory`` is not on its command line, after a
# properties file: ``SPARK_DRIVER_MEMORY``, then the deprecated ``SPARK_MEM``.
MEMORY_ENVIRONMENT = ("SPARK_DRIVER_MEMORY", "SPARK_MEM")


def physical_memory(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The bytes of memory this process may use: the machine's physical memory, or a container's
    limit (cgroup v2 ``memory.max``, v1 ``memory.limit_in_bytes``) when lower; None when unknown."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows) or no such name (macOS: a library call)
        return None
    if memory <= 0:
        return None
    for limit in _cgroup_limits(cgroup_root):
        memory = min(memory, limit)
    return memory


def _cgroup_limits(root: Path) -> list[int]:
    """The memory limits of the cgroups this process is in, as the files under ``root`` give them
    (a container sees its own group at the root; a host the group its path in /proc/self/cgroup names)."""
    paths = [root / "memory.max", root / "memory" / "memory.limit_in_bytes"]
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, group = line.split(":", 2)
            group = group.lstrip("/")
            if not group:
                continue
            if controllers == "":
                paths.append(root / group / "memory.max")
            elif "memory" in controllers.split(","):
                paths.append(root / "memory" / group / "memory.limit_in_bytes")
    except (OSError, ValueError):
        pass
    limits = []
    for path in paths:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) > 0:  # "max" (v2) or a huge number (v1): no limit
            limits.append(int(text))
    return limits


def driver_memory_mib(memory: int | None) -> int | None:
    """The heap in MiB a local session gets on a machine of ``memory`` bytes; None: Spark's default.

    >>> driver_memory_mib(24 * 1024 * MIB), driver_memory_mib(2 * 1024 * MIB), driver_memory_mib(None)
    (12288, None, None)
    >>> driver_memory_mib(256 * 1024 * MIB) == DRIVER_MEMORY_CAP_MIB
    True
    """
    if not memory:
        return None
    mib = min(int(memory * DRIVER_MEMORY_SHARE) // MIB, DRIVER_MEMORY_CAP_MIB)
    return mib if mib > SPARK_DEFAULT_DRIVER_MIB else None


def is_local_master(master: str | None) -> bool:
    """Whether ``master`` (None: segaudit's default, ``local[*]``) runs the executor inside the
    driver's JVM: ``local`` and ``local[...]``, not ``local-cluster[...]`` or a cluster manager's URL."""
    return master is None or master == "local" or master.startswith("local[")


def user_driver_memory(conf: Mapping[str, str] | None = None, environ: Mapping[str, str] = os.environ,
                       conf_dir: Path | None = None) -> str | None:
    """Where the user set the driver's memory for a JVM Spark's launcher starts, or None: ``conf``
    (``--conf``), ``PYSPARK_SUBMIT_ARGS`` (``--driver-memory``, ``--conf``, a ``--properties-file``
    that sets it), ``spark-defaults.conf`` (in ``conf_dir``, else ``SPARK_CONF_DIR`` or
    ``$SPARK_HOME/conf``), ``SPARK_DRIVER_MEMORY`` or ``SPARK_MEM``."""
    if conf and DRIVER_MEMORY in conf:
        return "--conf"
    args = shlex.split(environ.get("PYSPARK_SUBMIT_ARGS", ""))
    properties = None
    for i, arg in enumerate(args):
        if arg.startswith("--driver-memory") or arg.startswith(f"{DRIVER_MEMORY}="):
            return "PYSPARK_SUBMIT_ARGS"
        if arg.startswith("--properties-file"):
            properties = arg.partition("=")[2] or (args[i + 1] if i + 1 < len(args) else None)
    if properties is None:
        if conf_dir is None:
            conf_dir = _conf_dir(environ)
        properties = conf_dir / "spark-defaults.conf" if conf_dir else None
    if properties and DRIVER_MEMORY in _properties(Path(properties)):
        return str(properties)
    for name in MEMORY_ENVIRONMENT:
        if environ.get(name):
            return name
    return None


def _conf_dir(environ: Mapping[str, str]) -> Path | None:
    """The folder Spark's launcher reads ``spark-defaults.conf`` from."""
    if environ.get("SPARK_CONF_DIR"):
        return Path(environ["SPARK_CONF_DIR"])
    try:
        from pyspark.find_spark_home import _find_spark_home

        return Path(_find_spark_home()) / "conf"
    except Exception:  # noqa: BLE001 - no Spark home: no defaults file
        return None


def _properties(path: Path) -> set[str]:
    """The keys a Java properties file sets (``key value``, ``key=value`` or ``key: value``)."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    keys = set()
    for line in lines:
        line = line.strip()
        if line and line[0] not in "#!":
            keys.add(line.replace("=", " ").replace(":", " ").split()[0])
    return keys


def driver_memory_conf(master: str | None, conf: Mapping[str, str] | None = None,
                       environ: Mapping[str, str] = os.environ, memory: int | None = None,
                       conf_dir: Path | None = None) -> dict[str, str]:
    """``spark.driver.memory`` for a new local JVM (``master`` local, None or ``local[...]``) on a machine
    of ``memory`` bytes (:func:`physical_memory` when not given): :data:`DRIVER_MEMORY_SHARE` of it;
    nothing when the user set it (:func:`user_driver_memory`), when a cluster manager runs the
    executors, or when the share is not above Spark's default.

    >>> driver_memory_conf(None, {}, {}, 16 * 1024 * MIB, Path("/nonexistent"))
    {'spark.driver.memory': '8192m'}
    >>> driver_memory_conf("spark://m:7077", {}, {}, 16 * 1024 * MIB), driver_memory_conf(None, {}, {"SPARK_DRIVER_MEMORY": "2g"}, 16 * 1024 * MIB)
    ({}, {})
    """
    if not is_local_master(master) or user_driver_memory(conf, environ, conf_dir):
        return {}
    mib = driver_memory_mib(physical_memory() if memory is None else memory)
    return {DRIVER_MEMORY: f"{mib}m"} if mib else {}


# Spark keeps this much of an executor's heap for itself (``RESERVED_SYSTEM_MEMORY_BYTES``) and gives
# ``spark.memory.fraction`` (default 0.6) of the rest to execution and storage, shared by its tasks.
RESERVED_MIB = 300
DEFAULT_MEMORY_FRACTION = 0.6


def task_memory(spark) -> int | None:
    """The bytes of execution memory one task of ``spark`` may count on: an executor's unified memory
    (its heap less Spark's reserve, times ``spark.memory.fraction``) over the tasks it runs at once.
    In local mode the executor is the driver's JVM, whose heap it asks; on a cluster manager the
    executors' ``spark.executor.memory`` over ``spark.executor.cores``. None when unknown: over Spark
    Connect, or executors whose cores the configuration does not say."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):  # no context to ask
        return None
    conf, jvm = spark.sparkContext.getConf(), spark.sparkContext._jvm
    fraction = float(conf.get("spark.memory.fraction", str(DEFAULT_MEMORY_FRACTION)))
    if is_local_master(spark.sparkContext.master):
        heap, tasks = int(jvm.java.lang.Runtime.getRuntime().maxMemory()), spark.sparkContext.defaultParallelism
    else:
        cores = conf.get("spark.executor.cores", None)
        if not cores:
            return None
        memory = conf.get("spark.executor.memory", "1g")
        heap, tasks = int(jvm.org.apache.spark.network.util.JavaUtils.byteStringAsBytes(memory)), int(cores)
    usable = max(heap - RESERVED_MIB * MIB, 0) * fraction
    return int(usable // max(tasks, 1))
