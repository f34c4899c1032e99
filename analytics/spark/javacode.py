"""segaudit's own Java: compiled once against the Spark that runs it, and loaded into a session.

Some work is a pass over rows in order that no built-in function does as cheaply: the audit's replay
of each history in offset order, a window function on Spark's public API (``analytics/audit/java``,
an ``Aggregator`` registered with ``functions.udaf``). Its source ships in the
package. :func:`jar` compiles it with Eclipse's compiler for Java (ecj, fetched once from Maven
Central through :mod:`analytics.spark.maven`: it runs on the JRE Spark needs, no JDK) against the
jars of the installed Spark, into ``segaudit-<hash>.jar`` in the jar cache, where the hash covers
the sources, the Spark jars' names and the compiler: built once per installation (``scripts/setup.sh``
builds it), later calls only look. A session gets it the way Spark takes any jar: ``spark.jars``
when a new session starts (:func:`session_conf`, from
:func:`analytics.spark.session.get_spark`), ``--jars`` under ``spark-submit``
(:mod:`analytics.spark.submit`); :func:`load` says whether a session has it.

Nothing here is required: without the jar (no network for the compiler, a Spark whose classes the
source does not compile against) or over Spark Connect (no JVM of the client's own), :func:`load`
says no and the caller runs the same work as DataFrame operations, which give the same results
(``tests/test_replay_pass.py``); a failure raised in the Java while the work runs (:func:`failure`)
sends the caller to the same DataFrame form.
``python -m analytics.spark.javacode`` builds the jar and says where.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from analytics.spark import maven

# Eclipse's compiler, the newest release that runs on Java 17 (3.38 on needs Java 21).
ECJ = "org.eclipse.jdt:ecj:3.37.0"
SOURCES = sorted((Path(__file__).resolve().parent.parent / "audit" / "java").glob("*.java"))
# Whether each SparkContext has the jar (the context's id -> found), so it is looked up once.
_loaded: dict[int, bool] = {}
# Why the last :func:`jar` or :func:`load` said no (``python -m analytics.spark.javacode`` prints it).
why_not: list[str] = []


def installed_jars() -> Path:
    """The jars on the class path of the JVM a session starts (PySpark's own, or ``$SPARK_HOME``'s)."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home()) / "jars"


def jar(spark_jars: Path | None = None, *, build: bool = True, java: str | None = None) -> Path | None:
    """segaudit's jar for the Spark whose jars are ``spark_jars`` (the installed one's when not
    given), built when missing and ``build`` with ``java`` (``$JAVA_HOME``'s or the one on the path
    when not given); None when it cannot be (the reason is logged)."""
    folder = spark_jars or installed_jars()
    key = hashlib.sha256()
    for source in SOURCES:
        key.update(source.name.encode() + b"\0" + source.read_bytes())
    key.update(ECJ.encode() + "\0".join(sorted(p.name for p in folder.glob("*.jar"))).encode())
    target = maven.cache_dir() / f"segaudit-{key.hexdigest()[:20]}.jar"
    if target.is_file() or not build:
        return target if target.is_file() else None
    try:
        compiler = maven.jars([ECJ], "Eclipse's Java compiler")[0]
        home = os.environ.get("JAVA_HOME")
        _compile(java or (str(Path(home) / "bin" / "java") if home else shutil.which("java") or "java"),
                 compiler, folder, target)
    except (OSError, maven.FetchFailed, subprocess.CalledProcessError) as e:
        why_not[:] = [f"segaudit's Java was not built: {_reason(e)}"]
        return None
    return target


def _compile(java: str, compiler: Path, spark_jars: Path, target: Path) -> None:
    """The sources compiled for Java 17 into ``target``, through a temporary file renamed when whole."""
    with tempfile.TemporaryDirectory(prefix="segaudit-javac-") as scratch:
        classes = Path(scratch) / "classes"
        done = subprocess.run(
            [java, "-jar", str(compiler), "-17", "-nowarn", "-encoding", "UTF-8",
             "-cp", os.pathsep.join(str(p) for p in sorted(spark_jars.glob("*.jar"))),
             "-d", str(classes), *map(str, SOURCES)],
            capture_output=True, text=True)
        if done.returncode != 0:
            raise subprocess.CalledProcessError(done.returncode, "ecj", done.stdout, done.stderr)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.close(fd)
        try:
            with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
                for path in sorted(classes.rglob("*.class")):
                    archive.write(path, path.relative_to(classes).as_posix())
            os.replace(temporary, target)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)


def session_conf(jars: str | None = None, java: str | None = None) -> dict[str, str]:
    """The setting that gives a new session segaudit's jar: ``spark.jars`` with the jar first, then
    ``jars`` (the ones already set, comma-separated); empty when the jar cannot be built (``java``
    builds it). Spark puts the jars of ``spark.jars`` on its driver's class path and sends them to
    its executors."""
    ours = submit_jars(java)
    return {"spark.jars": ",".join([*ours, *([jars] if jars else [])])} if ours else {}


def submit_jars(java: str | None = None) -> list[str]:
    """segaudit's jar for the ``--jars`` of a ``spark-submit`` (none when it cannot be built)."""
    found = jar(java=java)
    return [] if found is None else [str(found)]


def load(spark) -> bool:
    """Whether segaudit's classes are in ``spark`` (a classic session of a local master whose
    ``spark.jars`` held the jar when it started: :func:`session_conf`, ``--jars``), looked up once
    per session."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return False
    context = spark.sparkContext
    if id(context) in _loaded:
        return _loaded[id(context)]
    if not context.master.startswith("local"):
        # executors in JVMs of their own fail to deserialize the function's tasks (a ClassCastException
        # of a SerializedLambda, tests/test_cluster_readme.py): the window steps run there
        why_not[:] = [f"segaudit's window function is not used on a cluster's executors ({context.master})"]
        _loaded[id(context)] = False
        return False
    jvm = spark._jvm
    try:
        jvm.java.lang.Class.forName("segaudit.ReplayWindow", True,
                                    jvm.java.lang.Thread.currentThread().getContextClassLoader())
        _loaded[id(context)] = True
    except Exception as e:  # noqa: BLE001 - a session started without the jar: the caller's DataFrame form then
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        why_not[:] = [f"segaudit's jar is not in this session's spark.jars ({first})"]
        _loaded[id(context)] = False
    return _loaded[id(context)]


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


def _reason(error: Exception) -> str:
    """One line of why a build failed: the compiler's first error line, or the error's."""
    if isinstance(error, subprocess.CalledProcessError):
        lines = [line.strip() for line in f"{error.stdout or ''}{error.stderr or ''}".splitlines()
                 if line.strip().strip("-")]  # ecj rules its messages off with dashes
        return f"the compiler failed: {_first_error(lines) or error.returncode}"
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _first_error(lines: list[str]) -> str | None:
    """ecj's first error as one line: where (``1. ERROR in F (at line N)``) and what (the line after
    the source line and its carets); else the first line.

    >>> _first_error(["1. ERROR in A.java (at line 3)", "x.y();", "^^^", "The method y() is undefined",
    ...               "1 problem (1 error)"])
    'ERROR in A.java (at line 3): The method y() is undefined'
    """
    for i, line in enumerate(lines):
        if "ERROR in" in line:
            carets = next((j for j in range(i + 1, len(lines)) if set(lines[j]) <= {"^"}), None)
            what = lines[carets + 1] if carets is not None and carets + 1 < len(lines) else ""
            return f"{line.split('. ', 1)[-1]}: {what}".rstrip(": ")
    return lines[0] if lines else None


def main() -> int:
    """Build the jar (``scripts/setup.sh``): its path on stdout, or on stderr why there is none
    (the audit then replays with window functions; never an error)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        print("segaudit setup: no java on PATH yet: segaudit's Java is built at the first audit", file=sys.stderr)
        return 0
    built = jar()
    if built is None:
        print(f"segaudit setup: {why_not[0]} (the audit replays with window functions)", file=sys.stderr)
    else:
        print(built)
    return 0


if __name__ == "__main__":
    sys.exit(main())
