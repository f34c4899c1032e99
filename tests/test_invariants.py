"""Claims of docs/architecture.md about what the code does, each held by a test here (or named in
the test that holds it), so that the document cannot silently go false.

- *Readers resolve a table through a commit, never a listing of OUT* (Publishing): a decoy Parquet
  file placed where a listing of ``OUT`` would find it changes no reader's answer, and only the
  modules listed in :data:`LISTINGS` list folders at all.
- *Commit objects are never deleted*: no call in ``analytics/publish`` deletes under ``_commits``
  (and ``tests/test_publish.py::test_old_runs_are_kept_by_time_and_by_count_and_no_commit_is_deleted``).
- *Every threshold lives in analytics/tuning.py*: ``tests/test_plans.py``.
- *A module imports from a lower layer, never upwards and never in a cycle*: ``tests/test_architecture.py``.
- *Every verdict, severity and explanation is a constant of analytics.contract*: below.
- *segaudit's Java stands on Spark's public API only, and reaches a session through spark.jars*:
  below (and ``tests/test_replay_pass.py``, which holds its results equal to Spark's window steps).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGES = ("analytics", "expectations", "jobs")

# Every call that lists a folder, by module, with what it lists. Inputs (log dirs), caches and pages
# a stage builds are listed; OUT is listed only by analytics/publish, which resolves the commits, and
# inside a table's folder resolved through a commit. A new listing is added here with its reason.
LISTINGS = {
    "analytics/publish/__init__.py": "OUT's run folders and a resolved output's entries (the commit's)",
    "analytics/publish/commits.py": "_commits, _views and _runs: the commits themselves and garbage collection",
    "analytics/publish/store.py": "the store's own primitives",
    "analytics/publish/tables.py": "the Delta tables' folders, after the run commit",
    "analytics/kafka/discovery.py": "the input log dirs",
    "analytics/kafka/sinks.py": "a table folder's Parquet files (a path resolved through a commit)",
    "analytics/kafka/fs.py": "the input's files in a bucket",
    "analytics/spark/tables.py": "whether a table folder resolved through a commit is partitioned",
    "analytics/inventory.py": "a table's Parquet files, in a folder resolved through the export's commit",
    "analytics/audit/settings.py": "the topic= folders of the batches table resolved through the commit",
    "analytics/forensics/tables.py": "batch_verdicts' topic= folders, through the commit (Published.names)",
    "analytics/export/__init__.py": "the files its tasks wrote so far in its own run folder (progress)",
    "analytics/cli/arguments.py": "whether an input path is a log dir",
    "analytics/export_plan.py": "the input's size before Spark starts",
    "analytics/spark/listing.py": "the input files of an export",
    "analytics/spark/objectstore.py": "the cached connector jars",
    "analytics/spark/classdata.py": "Spark's jars, for the class-data archive's key",
    "analytics/spark/javabuild.py": "segaudit's Java sources and the classes javac wrote",
    "analytics/spark/jvmlog.py": "the JVM's own log files",
    "analytics/generate/__init__.py": "whether a generated log dir is empty",
    "expectations/validate.py": "the Data Docs pages the validation just built, in its run folder",
}
LISTING_CALLS = {"listdir", "scandir", "walk", "iterdir", "glob", "rglob", "names", "get_file_info"}


def _sources():
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text())


def _called(tree) -> set[str]:
    return {node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            for node in ast.walk(tree) if isinstance(node, ast.Call)}


def test_only_the_modules_listed_list_folders():
    listing = {name for name, tree in _sources() if _called(tree) & LISTING_CALLS}
    assert listing - set(LISTINGS) == set(), "a new listing: name it in LISTINGS with what it lists"
    assert set(LISTINGS) - listing == set(), "LISTINGS names a module that no longer lists"


def test_no_commit_object_is_ever_deleted():
    """The publish package deletes run folders, views and scratch files, never a name under _commits."""
    for name, tree in _sources():
        if not name.startswith("analytics/publish/"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("delete", "remove", "unlink", "rmtree", "delete_file"):
                text = ast.unparse(node)
                assert "COMMITS" not in text and "commit_name" not in text, f"{name}: {text}"


def test_no_module_writes_a_literal_copy_of_a_verdict_or_an_explanation():
    """Not as a string, nor quoted inside one (a check's SQL): a misspelt copy would make a check that
    can never fail."""
    from analytics.contract import vocabulary

    names = {*vocabulary.VERDICTS, *vocabulary.EXPLANATIONS}
    copies = []
    for name, tree in _sources():
        if name == "analytics/contract/vocabulary.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found = {node.value} | set(re.findall(r"'([A-Za-z_]+)'", node.value))
                copies += [f"{name}:{node.lineno}: {n}" for n in sorted(found & names)]
    assert copies == []


@pytest.mark.spark
def test_readers_resolve_tables_through_the_commit_never_a_listing_of_out(audited, spark, tmp_path):
    """A decoy copy of a verdict file inside ``OUT/batch_verdicts/`` (the Delta table's folder) and in
    an abandoned run folder: segaudit's readers (pyarrow and Spark) and Delta's see the commit's
    files alone, so every count stays the audit's."""
    import deltalake

    from analytics.forensics.offset import explain
    from analytics.forensics.sql import run_sql
    from analytics.publish import published

    out = tmp_path / "out"
    shutil.copytree(audited["missed-dedup"][1], out, symlinks=True)
    total = sum(json.loads((out / "summary.json").read_text())["verdicts"].values())
    before = explain(str(out), "missed-dedup", 0, 41)

    source = Path(next(iter(sorted(Path(published(str(out)).path("batch_verdicts")).rglob("*.parquet")))))
    topic_folder = source.parent.name
    for decoy in (out / "batch_verdicts" / "decoy" / topic_folder, out / "_runs" / "decoy" / "batch_verdicts" / topic_folder):
        decoy.mkdir(parents=True)
        shutil.copy(source, decoy / "part-decoy.parquet")

    assert run_sql(spark, str(out), "select count(*) as n from batch_verdicts").first()["n"] == total
    assert explain(str(out), "missed-dedup", 0, 41) == before
    assert deltalake.DeltaTable(str(out / "batch_verdicts")).to_pyarrow_table().num_rows == total


# What segaudit's Java must not use: Spark's internals (no compatibility promise between releases),
# reflection, the block manager; and what the Python must not do to load it.
INTERNALS = re.compile(r"org\.apache\.spark\.sql\.(catalyst|classic|execution)\b|org\.apache\.spark\.storage\b"
                       r"|\bSparkEnv\b|java\.lang\.reflect\b|\bInternalRow\b|\bLogicalRDD\b|\bRDDBlockId\b")


def test_segaudits_java_uses_sparks_public_api_only_and_loads_through_spark_jars(spark):
    from analytics.spark import javacode

    sources = sorted((REPO / "analytics" / "audit" / "java").glob("*.java"))
    assert sources
    used = {path.name: INTERNALS.findall(path.read_text()) for path in sources}
    assert {name: hits for name, hits in used.items() if hits} == {}
    python = [path for package in PACKAGES for path in (REPO / package).rglob("*.py")
              if re.search(r"\baddURL\b|\baddJar\b", path.read_text())]
    assert python == []  # no class loader patched, no jar added to a running context
    assert javacode.load(spark), javacode.why_not
    assert str(javacode.jar()) in spark.conf.get("spark.jars").split(",")  # how the session has it

