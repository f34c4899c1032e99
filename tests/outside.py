"""Outside readers of OUT's Delta tables, as a user's own tools open them: DuckDB (``delta_scan``, its
``delta`` and ``httpfs`` extensions from PyPI) and ``deltalake``, locally and in a bucket, with the
standard AWS environment."""

from __future__ import annotations

import os
from urllib.parse import urlparse


def duckdb_connection():
    """DuckDB with its ``delta`` and ``httpfs`` extensions loaded and, when ``AWS_ENDPOINT_URL`` names an
    S3 server, a secret for it (path-style, from the environment's keys)."""
    import duckdb
    import duckdb_ext

    con = duckdb.connect(config={"extension_directory": os.path.join(list(duckdb_ext.__path__)[0], "extensions")})
    con.execute("LOAD httpfs; LOAD delta")
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        url = urlparse(endpoint)
        con.execute(f"""CREATE SECRET bucket (TYPE s3, KEY_ID '{os.environ["AWS_ACCESS_KEY_ID"]}',
                        SECRET '{os.environ["AWS_SECRET_ACCESS_KEY"]}', REGION '{os.environ.get("AWS_REGION", "us-east-1")}',
                        ENDPOINT '{url.netloc}', URL_STYLE 'path', USE_SSL {str(url.scheme == "https").lower()})""")
    return con


def duckdb_rows(con, table_uri: str) -> int:
    return con.execute(f"SELECT count(*) FROM delta_scan('{table_uri}')").fetchone()[0]


def deltalake_rows(table_uri: str) -> int:
    from deltalake import DeltaTable

    from analytics.publish.tables import storage_options

    return DeltaTable(table_uri, storage_options=storage_options()).to_pyarrow_table().num_rows


# Delta Lake's Spark connector for each Spark it is built for (Maven Central, io.delta): Spark resolves it
# with its own resolver, ``spark.jars.packages``, into an Ivy cache kept beside segaudit's other jars.
DELTA_SPARK = {"4.0": "io.delta:delta-spark_4.0_2.13:4.4.0", "4.1": "io.delta:delta-spark_4.1_2.13:4.4.0",
               "4.2": "io.delta:delta-spark_4.2_2.13:4.4.0"}
# The Spark a user reads with when Delta Lake has no connector for the suite's (none for 4.3 on Maven
# Central, checked 2026-12-02): the newest it builds for, in the version matrix's venv of that release.
DELTA_READER_RELEASE = "4.2.1"

SPARK_READER = """
import json, sys
from concurrent.futures import ThreadPoolExecutor
from pyspark.sql import SparkSession
from tests.outside import reader_conf
builder = SparkSession.builder.master("local[2]")
for key, value in reader_conf(sys.argv[1:]).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
with ThreadPoolExecutor(4) as tables:  # each count is a few small jobs: several at once keep both cores busy
    counts = tables.map(lambda uri: spark.read.format("delta").load(uri).count(), sys.argv[1:])
    print(json.dumps(dict(zip(sys.argv[1:], counts))))
"""


def delta_spark() -> str | None:
    """The coordinate of Delta's Spark connector for the installed PySpark, or None when Delta Lake has
    released none for it yet."""
    import pyspark

    return DELTA_SPARK.get(".".join(pyspark.__version__.split(".")[:2]))


def reader_conf(table_uris: list[str]) -> dict[str, str]:
    """A user's Spark settings for reading these tables as Delta: Delta's connector for the installed
    PySpark and, for ``s3://``, segaudit's s3a settings and jars for that PySpark's Hadoop."""
    from analytics.spark import maven
    from analytics.spark.objectstore import spark_conf

    return spark_conf(table_uris) | {
        "spark.jars.packages": delta_spark(),
        "spark.jars.ivy": str(maven.cache_dir().parent / "ivy"),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
        "spark.databricks.delta.snapshotPartitions": "1",  # a log of a few commits: not Delta's 50 tasks each
    }


def spark_rows(table_uris: list[str]) -> tuple[str, dict[str, int]]:
    """The PySpark version that read, and each table's row count as ``spark.read.format("delta").load(uri)``
    gives it, in a Spark of its own (a user's): the suite's PySpark when Delta Lake builds a connector for
    it, else ``DELTA_READER_RELEASE`` from its venv."""
    import json
    import subprocess
    import sys

    import pyspark

    from tests.venvs import ROOT, spark_venv

    python, version = sys.executable, pyspark.__version__
    if delta_spark() is None:
        python, version = str(spark_venv(DELTA_READER_RELEASE) / "bin" / "python"), DELTA_READER_RELEASE
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYSPARK_PYTHON")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([python, "-c", SPARK_READER, *table_uris], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return version, json.loads(done.stdout.strip().splitlines()[-1])
