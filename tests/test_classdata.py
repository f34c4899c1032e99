"""Class-data sharing for the JVM of a session (``analytics.spark.classdata``), with real JVMs: the
first session's JVM writes the archive as it exits, the next one maps Spark's classes from it, and a
torn archive is never handed to a JVM (mapping one crashes it)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from analytics.spark import classdata
from analytics.spark.session import spark_jars, check_java
from tests.commands import assert_own_lines
from tests.conftest import REPO

pytestmark = pytest.mark.spark

SESSION = ("from analytics.spark.session import get_spark\n"
           "spark = get_spark('local[1]')\n"
           "print(spark.range(3).count())\n")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SEGAUDIT_CACHE", str(tmp_path))
    monkeypatch.delenv(classdata.SWITCH, raising=False)
    return tmp_path / "jvm"


def _session(env: dict) -> subprocess.CompletedProcess:
    """A process that starts the session a command starts; its stderr holds segaudit's own lines only
    (the JVM writes its log and output to a file of its own)."""
    done = subprocess.run([sys.executable, "-c", SESSION], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})
    assert_own_lines(done.stderr)
    return done


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_the_first_session_leaves_a_writer_and_the_next_maps_sparks_classes_from_the_archive(cache, tmp_path):
    first = _session({"SEGAUDIT_CACHE": str(tmp_path)})
    assert first.returncode == 0 and first.stdout.strip() == "3", first.stderr[-2000:]
    assert "cds" not in first.stderr.lower()
    assert [p.suffix for p in cache.iterdir()] == [".lock"]  # claimed: its writer at work
    classdata.wait_for_writers(300)
    assert [p.suffix for p in cache.iterdir()] == [".jsa"]  # written, checked, moved into place

    loaded = tmp_path / "classes.log"  # where the next JVM takes each class from
    second = _session({"SEGAUDIT_CACHE": str(tmp_path), "JAVA_TOOL_OPTIONS": f"-Xlog:class+load=info:file={loaded}"})
    assert second.returncode == 0 and second.stdout.strip() == "3", second.stderr[-2000:]
    assert [p.suffix for p in cache.iterdir()] == [".jsa"]  # no second writer
    lines = loaded.read_text().splitlines()
    context = [line for line in lines if " org.apache.spark.SparkContext " in line]
    assert context and "source: shared objects file (top)" in context[0], context
    shared = sum("shared objects file (top)" in line for line in lines)
    assert shared > 5000, f"{shared} of {len(lines)} classes from the archive"


def test_a_torn_archive_is_deleted_and_the_key_free_again(cache):
    java, version = check_java()
    assert classdata.archive_for(java, version, spark_jars(), write=False) == classdata.Archive()
    assert not cache.exists() or not any(cache.iterdir())  # asked not to write: nothing claimed
    key = classdata._key(java, version, spark_jars())
    done, part, claim = classdata._paths(key)
    part.write_bytes(b"\x00" * 4096)  # what a writer killed while its JVM wrote leaves
    claim.write_text(f'{{"pid": {_dead_pid()}, "class_path": "{spark_jars()}/*"}}')

    assert classdata.archive_for(java, version, spark_jars(), write=False) == classdata.Archive()
    assert not part.exists() and not claim.exists() and not done.exists()


def test_while_another_writer_is_at_it_a_session_starts_without_and_claims_nothing(cache):
    java, version = check_java()
    key = classdata._key(java, version, spark_jars())
    done, part, claim = classdata._paths(key)
    cache.mkdir(parents=True)
    claim.write_text(f'{{"pid": {os.getpid()}, "class_path": ""}}')  # its JVM alive: this process
    part.write_bytes(b"\x00")
    assert classdata.archive_for(java, version, spark_jars()) == classdata.Archive()
    assert claim.exists() and part.exists() and not done.exists()


def test_another_java_or_spark_gets_another_archive_and_it_can_be_turned_off(cache, tmp_path, monkeypatch):
    java, version = check_java()
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"1")
    one = classdata._key(java, version, jars)
    (jars / "spark-core.jar").write_bytes(b"22")
    assert classdata._key(java, version, jars) not in (one, classdata._key(java, version + "\nbuild 2", jars))
    assert classdata._key(java, "Picked up JAVA_TOOL_OPTIONS: -Xmx1g\n" + version, spark_jars()) == \
        classdata._key(java, version, spark_jars())
    monkeypatch.setenv(classdata.SWITCH, "off")
    classdata.archive_for(java, version, spark_jars())
    assert not cache.exists()
