"""Every Spark release the package's pin admits, each in its own venv: the sample's main job under
that release's ``spark-submit``, OUT in a bucket, gives the golden verdicts and the reference replay's
(the replay's differential test), and stderr holds segaudit's lines only.

The suite itself runs on the Spark of ``.venv``, the newest release the pin admits; this module runs
the sample on the newest patch release of every other minor version (``SPARK_RELEASES``), each in a
venv of PySpark and segaudit's dependencies (``tests/venvs.py``: built once, kept between runs;
segaudit itself comes from this checkout, with the jar ``scripts/setup.sh`` built). Should
segaudit's window function fail on a Spark, the audit says so in one line and runs on Spark's
window steps: the verdicts are the same. The wheel, built as a release is, is installed into a
fresh venv beside the newest PySpark and runs the sample on the jar it carries.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analytics.publish import published
from tests import outside
from tests.commands import assert_own_lines, assert_submitted_lines
from tests.outs import published_table, table_dir
from tests.venvs import ROOT, dependencies, spark_venv

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# the newest patch release of each minor version the pin admits but .venv does not hold (.venv holds the newest)
SPARK_RELEASES = ("4.0.5", "4.1.4", "4.2.1")
JAVA_FALLBACK = "segaudit's window function failed on this Spark"
# the columns of batch_verdicts the reference replay gives (tests/test_audit_differential.py)
COMPARED = ("verdict", "severity", "explained_by", "expected_sequence", "prev_base_offset", "idle_ms", "offset_holes",
            "state_last_sequence", "state_last_offset", "expired_offset", "conflict_offset")


def _pin() -> str:
    [pin] = [d for d in dependencies() if d.startswith("pyspark")]
    return pin.split("]", 1)[1].split("#")[0].strip()


def _minor(version: str) -> tuple[int, int]:
    return tuple(map(int, version.split(".")[:2]))


def test_the_pin_admits_exactly_the_tested_minor_versions_and_the_suite_runs_on_the_newest():
    import pyspark

    tested = sorted({_minor(v) for v in (*SPARK_RELEASES, pyspark.__version__)})
    (low_major, low), (major, minor) = tested[0], tested[-1]
    assert _pin() == f">={low_major}.{low},<{major}.{minor + 1}"
    assert len(tested) == minor - low + 1  # none skipped between
    assert _minor(pyspark.__version__) == tested[-1]  # the whole suite runs on the newest minor version
    assert _minor(pyspark.__version__) not in {_minor(v) for v in SPARK_RELEASES}  # which the matrix need not run
    suite = (ROOT / "scripts" / "test-constraints.txt").read_text()
    assert f"pyspark=={pyspark.__version__}" in suite.splitlines()  # the suite runs on the Spark it names
    # the Spark that reads OUT as Delta where Delta Lake builds no connector for the suite's is one of these
    assert outside.delta_spark() or outside.DELTA_READER_RELEASE in SPARK_RELEASES


def _assert_golden(verdicts) -> None:
    """``verdicts`` (a table of batch_verdicts) are the sample's golden ones, batch by batch."""
    truth = {(r["topic"], r["partition"], r["base_offset"]): (r["verdict"], r["severity"], r["explained_by"])
             for r in pq.read_table(ROOT / "data" / "mixed.truth" / "batches.parquet").to_pylist()}
    got = {(r["topic"], r["partition"], r["base_offset"]): (r["verdict"], r["severity"], r["explained_by"])
           for r in verdicts.to_pylist()}
    assert got == truth


def _submit_sample(version: str, out: str) -> subprocess.CompletedProcess:
    """The sample's main job (``jobs/run.py``) with ``spark-submit`` of PySpark ``version``, on local
    cores, with the arguments ``python -m analytics.spark.submit`` prints, as a user submits it: it
    exits 1 (the sample's faults fail some expectations) with segaudit's lines only on stderr."""
    venv = spark_venv(version)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": str(venv / "bin" / "python")}
    env.pop("SPARK_HOME", None)
    home = subprocess.run([str(venv / "bin" / "python"), "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
                          env=env, capture_output=True, text=True, check=True).stdout.strip()
    s3 = ["--s3"] if out.startswith("s3://") else []  # the connector, as the how-to's cluster block submits it
    args = subprocess.run([str(venv / "bin" / "python"), "-m", "analytics.spark.submit", *s3], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True).stdout.split()
    done = subprocess.run(
        [str(Path(home) / "bin" / "spark-submit"), "--master", "local[2]", *args, "jobs/run.py", "data/mixed",
         "--out", out, "--config", "data/mixed.truth/audit.toml"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 1, done.stderr[-3000:]
    assert_submitted_lines(done.stderr)  # the launcher's line (docs/how-to/s3-and-clusters.md), else segaudit's
    summary = json.loads(published(out).read_text("summary.json"))
    assert summary["replay"] == "window_function", summary.get("replay_note")
    return done


def _assert_the_reference_replay_agrees(out: str) -> None:
    """The replay's differential test on this Spark: every batch of the export replayed by the
    pure-Python reference (:mod:`analytics.audit.reference`) under the configuration the audit
    recorded gives the Spark replay's verdict, severity, explanation and every fact it shows."""
    from analytics.audit.config import config_from_mapping
    from analytics.audit.reference import replay

    configuration = json.loads(published(out).read_text("summary.json"))["configuration"]
    batches = published_table(out, "batches").to_pylist()
    starts = {(r["topic"], r["partition"]): r["log_start_offset"] for r in published_table(out, "log_start_offsets").to_pylist()}
    want = replay(batches, config_from_mapping(configuration), starts)
    got = {(r["file"], r["file_position"]): r for r in published_table(out, "batch_verdicts").to_pylist()}
    assert got.keys() == want.keys() and len(got) == len(batches)
    diffs = [(k, c, got[k][c], want[k].get(c)) for k in want for c in COMPARED if got[k][c] != want[k].get(c)]
    assert diffs == []


@pytest.mark.s3
@pytest.mark.parametrize("version", SPARK_RELEASES)
def test_spark_submit_of_the_sample_into_a_bucket_gets_the_golden_verdicts_and_the_reference_replays_on_every_spark(
        version, s3_server):
    """The sample's main job under each Spark's ``spark-submit``, OUT in a bucket: the S3 connector
    that matches that Spark's Hadoop (:mod:`analytics.spark.objectstore`) writes it, and the verdicts
    read back from the bucket are the golden ones and the reference replay's."""
    bucket = s3_server.make_bucket("spark-" + version.replace(".", "-"))
    out = f"{bucket}/out"
    _submit_sample(version, out)
    _assert_golden(published_table(out, "batch_verdicts"))
    _assert_the_reference_replay_agrees(out)


def _wheel(folder: Path) -> Path:
    """segaudit's wheel, built as a release is (``pip wheel``: the build backend installs the Spark it
    compiles the jar against) from a copy of this checkout's files."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    source = folder / "source"
    for name in listed:
        if (ROOT / name).is_file() and not name.endswith(".jar"):
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder / "dist"),
                           str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = (folder / "dist").glob("segaudit-*.whl")
    return wheel


def test_the_wheel_in_a_fresh_venv_runs_the_sample_on_the_jar_it_carries(tmp_path):
    """The wheel installed by pip into a fresh venv, beside the newest PySpark (and segaudit's other
    dependencies: the cached venv of that release, on the fresh one's path), outside any checkout:
    the sample's ``run`` gives the golden verdicts, and a session of that install has the jar the
    wheel carries, built from the sources it carries, in its ``spark.jars``."""
    import pyspark

    from analytics.spark import javabuild

    newest = pyspark.__version__  # the suite's Spark, the newest the pin admits
    wheel = _wheel(tmp_path)
    fresh = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(fresh)], check=True)
    [site] = fresh.glob("lib/python3*/site-packages")
    [others] = spark_venv(newest).glob("lib/python3*/site-packages")
    (site / "segaudit-dependencies.pth").write_text(f"{others}\n")
    done = subprocess.run([str(fresh / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                           str(wheel)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "SPARK_HOME")}
    out = tmp_path / "out"
    done = subprocess.run([str(fresh / "bin" / "segaudit"), "run", str(ROOT / "data" / "mixed"), "--out", str(out),
                           "--config", str(ROOT / "data" / "mixed.truth" / "audit.toml")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 1, done.stderr[-3000:]
    assert_own_lines(done.stderr)
    assert JAVA_FALLBACK not in done.stderr
    assert json.loads((out / "summary.json").read_text())["replay"] == "window_function"
    _assert_golden(pq.read_table(str(table_dir(out, "batch_verdicts"))))

    probe = ("import analytics, pyspark; from analytics.spark import javacode; "
             "from analytics.spark.session import get_spark; spark = get_spark('local[1]'); "
             "print(analytics.__file__, pyspark.__version__, javacode.jar(), spark.conf.get('spark.jars'), "
             "javacode.load(spark), sep='\\n')")
    done = subprocess.run([str(fresh / "bin" / "python"), "-c", probe], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    package, version, jar, jars, loaded = done.stdout.strip().splitlines()[-5:]
    assert Path(package).is_relative_to(site) and version == newest
    assert Path(jar) == site / "analytics" / "audit" / "java" / "segaudit.jar"
    assert jar in jars.split(",") and loaded == "True"
    assert javabuild.built_from(Path(jar)) == javabuild.digest()
