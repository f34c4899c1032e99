"""How segaudit's jar is built: its Java sources (``analytics/audit/java``) compiled by a JDK's
``javac`` for Java 17 against a Spark's jars, into ``segaudit.jar`` beside the sources.

The jar is built when the package is: the wheel's build (``scripts/build_backend.py``, against the
oldest Spark the pin admits, whose public API every later 4.x keeps) or, for a checkout installed
in place, ``scripts/setup.sh`` (``python -m analytics.spark.javacode``, against the installed
Spark). Nothing is compiled when segaudit runs. The jar names the digest of the sources it was
built from (:data:`DIGEST_ENTRY`), so a jar older than its sources is told apart and not used.

Only the standard library here: the build backend loads this file before any dependency is
installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

FOLDER = Path(__file__).resolve().parent.parent / "audit" / "java"
JAR = FOLDER / "segaudit.jar"
DIGEST_ENTRY = "META-INF/segaudit-sources.sha256"
JDK = "a JDK's javac (On Debian: sudo apt-get install -y openjdk-17-jdk-headless)"


class BuildFailed(Exception):
    """The jar could not be built (no javac, or the sources do not compile against the Spark)."""


def sources() -> list[Path]:
    return sorted(FOLDER.glob("*.java"))


def digest() -> str:
    """The SHA-256 of the sources' names and bytes."""
    key = hashlib.sha256()
    for source in sources():
        key.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return key.hexdigest()


def built_from(jar: Path) -> str | None:
    """The digest of the sources ``jar`` was built from (None when it names none or is unreadable)."""
    try:
        with zipfile.ZipFile(jar) as archive:
            return archive.read(DIGEST_ENTRY).decode().strip()
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def current(jar: Path | None = None) -> bool:
    """Whether ``jar`` (the package's when not given) exists and was built from the sources beside it."""
    jar = jar or JAR
    return jar.is_file() and built_from(jar) == digest()


def javac() -> str:
    """``$JAVA_HOME``'s javac, else the one on the path; :class:`BuildFailed` when there is none."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "javac") if home else None
    if not (found and os.access(found, os.X_OK)):
        found = shutil.which("javac")
    if not found:
        raise BuildFailed(f"no javac: building segaudit's jar needs {JDK}")
    return found


def build(spark_jars: Path, target: Path | None = None) -> Path:
    """The sources compiled for Java 17 against the jars in ``spark_jars`` into ``target`` (the
    package's jar when not given), written under a temporary name and renamed when whole."""
    target = target or JAR
    compiler = javac()
    with tempfile.TemporaryDirectory(prefix="segaudit-javac-") as scratch:
        classes = Path(scratch) / "classes"
        done = subprocess.run(
            [compiler, "--release", "17", "-nowarn", "-encoding", "UTF-8", "-cp", str(spark_jars / "*"),
             "-d", str(classes), *map(str, sources())], capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildFailed(f"javac failed against {spark_jars}: {first_error(done.stderr + done.stdout)}")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.close(fd)
        try:
            with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
                archive.writestr(DIGEST_ENTRY, digest() + "\n")
                for path in sorted(classes.rglob("*.class")):
                    archive.write(path, path.relative_to(classes).as_posix())
            os.replace(temporary, target)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    return target


def first_error(output: str) -> str:
    """javac's first error as one line (``File.java:3: error: ...``), else its first line.

    >>> first_error("Note: x\\nA.java:3: error: cannot find symbol\\n  x.y();\\n1 error\\n")
    'A.java:3: error: cannot find symbol'
    """
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return next((line for line in lines if ": error:" in line), lines[0] if lines else "no output")
