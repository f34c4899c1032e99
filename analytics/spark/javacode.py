"""segaudit's own Java, loaded into a session.

Some work is a pass over rows in order that no built-in function does as cheaply: the audit's replay
of each history in offset order, a window function on Spark's public API (``analytics/audit/java``,
an ``Aggregator`` registered with ``functions.udaf``). It ships built: ``segaudit.jar`` beside its
sources in the package, compiled when the package is built (:mod:`analytics.spark.javabuild`);
nothing is compiled or fetched when segaudit runs. A session gets it the way Spark takes any jar:
``spark.jars`` when a new session starts (:func:`session_conf`, from
:func:`analytics.spark.session.get_spark`), ``--jars`` under ``spark-submit``
(:mod:`analytics.spark.submit`); :func:`load` says whether a session has it.

Nothing here is required: without the jar (a checkout installed where there was no JDK, a jar older
than its sources) or over Spark Connect (no JVM of the client's own), :func:`load` says no and the
caller runs the same work as DataFrame operations, which give the same results
(``tests/test_replay_pass.py``); a failure raised in the Java while the work runs (:func:`failure`)
sends the caller to the same DataFrame form.
``python -m analytics.spark.javacode`` builds the jar of a checkout installed in place
(``scripts/setup.sh``) and says where.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from analytics.spark import javabuild, memory

# Whether each SparkContext has the jar (the context's id -> found), so it is looked up once.
_loaded: dict[int, bool] = {}
# Why the last :func:`jar` or :func:`load` said no (``python -m analytics.spark.javacode`` prints it).
why_not: list[str] = []


def installed_jars() -> Path:
    """The jars on the class path of the JVM a session starts (PySpark's own, or ``$SPARK_HOME``'s)."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home()) / "jars"


def jar() -> Path | None:
    """segaudit's jar in the package, when it was built from the sources beside it; else None (the
    reason in :data:`why_not`)."""
    if javabuild.current():
        return javabuild.JAR
    stale = javabuild.JAR.is_file()
    why_not[:] = [f"segaudit's jar {'is older than its Java sources' if stale else 'was not built'}"
                  " (a checkout: bash scripts/setup.sh builds it with " + javabuild.JDK.removeprefix("a ") + ")"]
    return None


def session_conf(jars: str | None = None) -> dict[str, str]:
    """The setting that gives a new session segaudit's jar: ``spark.jars`` with the jar first, then
    ``jars`` (the ones already set, comma-separated); empty when there is no jar. Spark puts the jars
    of ``spark.jars`` on its driver's class path and sends them to its executors."""
    ours = submit_jars()
    return {"spark.jars": ",".join([*ours, *([jars] if jars else [])])} if ours else {}


def submit_jars() -> list[str]:
    """segaudit's jar for the ``--jars`` of a ``spark-submit`` (none when there is none)."""
    found = jar()
    return [] if found is None else [str(found)]


def load(spark) -> bool:
    """Whether segaudit's classes are in ``spark`` (a classic session whose ``spark.jars`` held the
    jar when it started: :func:`session_conf`, ``--jars``), looked up once per session.

    The driver having them is not enough on a master whose executors run in JVMs of their own (any
    but ``local`` and ``local[...]``: ``local-cluster[...]`` too, :func:`memory.is_local_master`): a
    task of the function deserializes segaudit's classes there (the aggregator, its buffer's class
    in the encoders' expressions), and where the executors lack them the JVM reports the missing
    class as a ``ClassCastException`` of a ``SerializedLambda`` into ``BoundReference.accessor``
    (java.io defers the ``ClassNotFoundException``, so the lambda that captured the class is never
    resolved). So there the jar that holds the driver's classes must also be one Spark ships to
    the executors (``SparkContext.listJars``: ``spark.jars``, ``--jars``) or be on their class path
    (``spark.executor.extraClassPath``)."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return False
    context = spark.sparkContext
    if id(context) in _loaded:
        return _loaded[id(context)]
    jvm = spark._jvm
    try:
        found = jvm.java.lang.Class.forName("segaudit.ReplayWindow", True,
                                            jvm.java.lang.Thread.currentThread().getContextClassLoader())
        _loaded[id(context)] = True
    except Exception as e:  # noqa: BLE001 - a session started without the jar: the caller's DataFrame form then
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        why_not[:] = [f"segaudit's jar is not in this session's spark.jars ({first})"]
        _loaded[id(context)] = False
        return False
    if not memory.is_local_master(context.master) and not _shipped(context, found):
        why_not[:] = ["segaudit's jar is on the driver's class path but not shipped to the executors of "
                      f"{context.master} (give it in spark.jars or --jars)"]
        _loaded[id(context)] = False
    return _loaded[id(context)]


def _shipped(context, found) -> bool:
    """Whether the executors of ``context`` get the jar that holds ``found`` (a class loaded on the
    driver): among the jars the context ships (``SparkContext.listJars``), by name, or on the
    executors' own class path."""
    source = found.getProtectionDomain().getCodeSource()
    if source is None:
        return False
    name = Path(str(source.getLocation().getPath())).name
    shipped = str(context._jsc.sc().listJars().mkString("\n")).splitlines()
    executor_path = context.getConf().get("spark.executor.extraClassPath", "") or ""
    return any(j.rstrip("/").rpartition("/")[2] == name for j in shipped) or any(
        Path(p).name == name for p in executor_path.split(":") if p)


def failure(error: BaseException) -> str | None:
    """One line of what failed when ``error`` was raised in segaudit's Java (a frame of a
    ``segaudit.`` class in its Java stack trace, on the driver or in a task), else None: the
    caller's work then runs its DataFrame form instead (a Spark the Java does not expect fails
    there, not in the results)."""
    trace = f"{error}\n{getattr(error, '_stackTrace', None) or ''}"  # Py4J's error, or PySpark's captured one
    if not isinstance(error, Exception) or "at segaudit." not in trace:
        return None
    thrown = [line.strip() for line in trace.splitlines() if _THROWN.match(line.strip())]
    causes = [line.removeprefix("Caused by: ") for line in thrown if line.startswith("Caused by: ")]
    line = (causes or thrown or [type(error).__name__])[-1 if causes else 0]
    line = _PACKAGE.sub("", line, count=1)  # the exception's simple name
    return line if len(line) <= 120 else line[:119] + "…"


# A Java class name's package (``java.lang.``), and the first line of a Java exception in a stack
# trace (``java.lang.IllegalArgumentException: ...``, perhaps after ``Caused by: ``).
_PACKAGE = re.compile(r"^(?:[a-z_$][\w$]*\.)+")
_THROWN = re.compile(r"^(?:Caused by: )?(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error)\b.*")


def main() -> int:
    """Build the jar of a checkout installed in place against the installed Spark (``scripts/setup.sh``;
    a wheel carries its own): its path on stdout, or on stderr why there is none (the audit then
    replays with Spark's window steps; never an error)."""
    if javabuild.current():
        print(javabuild.JAR)
        return 0
    try:
        print(javabuild.build(installed_jars()))
    except javabuild.BuildFailed as e:
        print(f"segaudit setup: {e}; the audit replays with Spark's window steps, slower", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
