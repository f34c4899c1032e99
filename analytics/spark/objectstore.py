"""Spark on S3 (``s3://`` and ``s3a://`` paths): Hadoop's S3A connector, fetched once, and its settings.

The pyspark wheel holds no S3 support. :func:`s3a_jars` fetches what S3A needs, matching the Hadoop
inside the installed Spark (read from its ``hadoop-client-api-<version>.jar``), through
:mod:`analytics.spark.maven` (from Maven Central or the repository ``SEGAUDIT_MAVEN_REPOSITORY``
names, each jar checked against the SHA-256 pinned in ``jars.sha256``) into ``~/.cache/segaudit/jars``:
once, at install (``scripts/setup.sh``) or at the first command that names a bucket; later calls
only look at the files. The jars: ``hadoop-aws``, Spark's cloud committer
glue (``spark-hadoop-cloud``) and the AWS SDK v2 as its separate modules, not the 612 MiB ``bundle``
``hadoop-aws`` names (9.5 MiB in all, fetched in about a second; the SDK's own dependencies on
Apache HttpClient, Netty and SLF4J are Spark's jars). Anything missing fails as :class:`ConnectorUnavailable`, saying what.

:func:`spark_conf` is the Spark configuration of a session whose input or OUT is on S3: the jars,
``s3://`` served by S3A, the S3A "magic" committer (a job's files appear at its commit and
``_SUCCESS`` lists them as JSON), and the endpoint, addressing and region of the standard AWS
environment (``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, ``AWS_REGION`` /
``AWS_DEFAULT_REGION``). Credentials never enter the configuration (Spark shows it in its UI and
logs): the JVM inherits this process's environment and the SDK's default chain reads them there
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``), from ``AWS_PROFILE``'s
profile, a web identity token, or the container's or instance's role. These are defaults: the
caller applies the user's own ``--conf`` after them, so a ``spark.hadoop.fs.s3a.*`` the user sets
wins (Hadoop's per-bucket ``fs.s3a.bucket.<name>.*`` settings win over both). A profile's own
``endpoint_url`` is not read: an endpoint comes from the environment or ``--conf``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from analytics.errors import SegauditError
from analytics.spark import maven

SCHEMES = ("s3", "s3a")

# Hadoop inside pyspark -> the AWS SDK v2 its hadoop-aws was built with (hadoop-project's
# aws-java-sdk-v2.version). 3.4.1 names 2.24.6, but s3-transfer-manager 2.24.6 was never published
# to Central: 2.24.8, a patch release later, has every module.
SDK_VERSIONS = {"3.5.0": "2.35.4", "3.4.2": "2.29.52", "3.4.1": "2.24.8"}
# The SDK modules hadoop-aws needs: s3, s3-transfer-manager (copies, uploads of local files) and sts
# (assumed roles, web identity tokens) with their SDK dependencies, and the HTTP clients S3A binds:
# apache-client (every request) and netty-nio-client (the transfer manager's async client). From
# `mvn dependency:list` of s3 + s3-transfer-manager + sts; their other dependencies are in Spark's
# jars (httpclient, httpcore, commons-codec, jcl-over-slf4j, slf4j-api, netty). Against versitygw the
# first write fails without s3-transfer-manager or aws-query-protocol, copyFromLocalFile without
# netty-nio-client; sts and the eventstream pair (0.5 MiB) are for roles and S3 Select.
SDK_MODULES = (
    "annotations", "apache-client", "arns", "auth", "aws-core", "aws-query-protocol", "aws-xml-protocol",
    "checksums", "checksums-spi", "crt-core", "endpoints-spi", "http-auth", "http-auth-aws", "http-auth-spi",
    "http-client-spi", "identity-spi", "json-utils", "metrics-spi", "netty-nio-client", "profiles",
    "protocol-core", "regions", "s3", "s3-transfer-manager", "sdk-core", "sts", "third-party-jackson-core",
    "utils",
)
_SINCE_2_29 = ("http-auth-aws-eventstream", "retries", "retries-spi")
SDK_MODULES_SINCE = {"2.29.52": _SINCE_2_29, "2.35.4": (*_SINCE_2_29, "utils-lite")}
THIRD_PARTY = ("org.reactivestreams:reactive-streams:1.0.4", "software.amazon.eventstream:eventstream:1.0.1")
# What a Hadoop's hadoop-aws needs besides: 3.5 opens every S3A stream through the S3 Analytics
# Accelerator (hadoop-project's amazon-s3-analyticsaccelerator-s3.version; it declares no dependencies).
HADOOP_SINCE = {"3.5.0": ("software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1",)}
# spark-hadoop-cloud (PathOutputCommitProtocol, BindingParquetOutputCommitter) as published on
# Central: Spark's own version when it is there, else the newest of its line that was checked; none
# was published for 4.2 and 4.3 (checked 2026-11-28): 4.1.2's two classes commit their writes
# (tests/test_spark_versions.py writes OUT to a bucket on each).
SPARK_CLOUD_PUBLISHED = ("4.0.0", "4.0.1", "4.0.2", "4.1.1", "4.1.2")
SPARK_CLOUD_DEFAULT = {"4.0": "4.0.2", "4.1": "4.1.1", "4.2": "4.1.2", "4.3": "4.1.2"}

COMMITTER_FACTORY = "org.apache.hadoop.fs.s3a.commit.S3ACommitterFactory"
# Keys set in the configuration (fs.s3a.access.key) first, then the SDK's default chain: environment,
# system properties, web identity token, AWS_PROFILE's profile, container role, instance role.
CREDENTIALS = ",".join((
    "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider",
    "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider",
))


class ConnectorUnavailable(SegauditError):
    """The S3 connector's jars could not be fetched or do not match this Spark."""


def pyspark_jars() -> Path:
    """The jars folder of the Spark a session starts: ``$SPARK_HOME/jars``, else the pyspark package's."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "jars"
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise ConnectorUnavailable("pyspark is not installed and SPARK_HOME is not set")
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def _version_of(jars: Path, prefix: str) -> str:
    for jar in sorted(jars.glob(f"{prefix}-*.jar")):
        found = re.fullmatch(re.escape(prefix) + r"-(\d+\.\d+\.\d+)\.jar", jar.name)
        if found:
            return found.group(1)
    raise ConnectorUnavailable(f"no {prefix}-<version>.jar in {jars}: cannot tell which S3 connector matches")


def coordinates(jars: Path | None = None) -> list[str]:
    """The Maven coordinates (group:artifact:version) S3A needs with the Spark whose jars are ``jars``.

    >>> [c for c in coordinates() if not c.startswith("software.amazon.awssdk:")][:2]  # doctest: +ELLIPSIS
    ['org.apache.hadoop:hadoop-aws:3...', 'org.apache.spark:spark-hadoop-cloud_2.13:4...']
    """
    jars = jars or pyspark_jars()
    hadoop = _version_of(jars, "hadoop-client-api")
    spark = _version_of(jars, "spark-core_2.13")
    if hadoop not in SDK_VERSIONS:
        raise ConnectorUnavailable(f"no S3 connector is known for Hadoop {hadoop} (Spark {spark}); "
                                   f"known: Hadoop {', '.join(SDK_VERSIONS)}")
    cloud = spark if spark in SPARK_CLOUD_PUBLISHED else SPARK_CLOUD_DEFAULT.get(spark.rpartition(".")[0])
    if cloud is None:
        raise ConnectorUnavailable(f"no spark-hadoop-cloud is known for Spark {spark}")
    return _coordinates(hadoop, cloud)


def _coordinates(hadoop: str, cloud: str) -> list[str]:
    sdk = SDK_VERSIONS[hadoop]
    modules = sorted(SDK_MODULES + SDK_MODULES_SINCE.get(sdk, ()))
    return [f"org.apache.hadoop:hadoop-aws:{hadoop}", f"org.apache.spark:spark-hadoop-cloud_2.13:{cloud}",
            *(f"software.amazon.awssdk:{m}:{sdk}" for m in modules), *THIRD_PARTY, *HADOOP_SINCE.get(hadoop, ())]


def every_coordinate() -> list[str]:
    """Every jar :func:`coordinates` can name, whatever the Spark: each has its SHA-256 pinned
    (``analytics/spark/jars.sha256``, ``scripts/pin_jars.py``)."""
    clouds = {*SPARK_CLOUD_PUBLISHED, *SPARK_CLOUD_DEFAULT.values()}
    return sorted({c for hadoop in SDK_VERSIONS for cloud in clouds for c in _coordinates(hadoop, cloud)})


def s3a_jars(jars: Path | None = None) -> list[Path]:
    """The jars S3A needs with this Spark, fetched the first time (see the module)."""
    try:
        return maven.jars(coordinates(jars), "the S3 connector's jars")
    except maven.FetchFailed as e:
        raise ConnectorUnavailable(f"could not fetch the S3 connector's jars: {e}") from e


def uses_s3(paths: Iterable[str]) -> bool:
    """Whether any of ``paths`` is an ``s3://`` or ``s3a://`` URI.

    >>> uses_s3(["/data/logs", "s3a://bucket/out"]), uses_s3(["file:///x", "gs://b/y"])
    (True, False)
    """
    return any(urlsplit(str(p)).scheme.lower() in SCHEMES for p in paths)


def endpoint_conf(environ=os.environ) -> dict[str, str]:
    """The S3A settings of the standard AWS environment: endpoint (path-style, TLS as its URL says)
    and region. Never a credential.

    >>> endpoint_conf({"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_DEFAULT_REGION": "eu-west-1"})
    {'fs.s3a.endpoint': 'http://127.0.0.1:9000', 'fs.s3a.path.style.access': 'true', \
'fs.s3a.connection.ssl.enabled': 'false', 'fs.s3a.endpoint.region': 'eu-west-1'}
    >>> endpoint_conf({"AWS_SECRET_ACCESS_KEY": "x"})
    {}
    """
    conf = {}
    endpoint = environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        conf["fs.s3a.endpoint"] = endpoint
        conf["fs.s3a.path.style.access"] = "true"
        scheme = urlsplit(endpoint).scheme.lower()
        if scheme in ("http", "https"):
            conf["fs.s3a.connection.ssl.enabled"] = str(scheme == "https").lower()
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if region:
        conf["fs.s3a.endpoint.region"] = region
    return conf


# The connector's classes a session's driver loads itself, as it is made (its settings name them):
# under spark-submit they must be on the driver's class path already (``--jars``).
DRIVER_CLASSES = ("org.apache.spark.internal.io.cloud.PathOutputCommitProtocol", "org.apache.hadoop.fs.s3a.S3AFileSystem")


def spark_conf(paths: Iterable[str], environ=os.environ) -> dict[str, str]:
    """The default Spark configuration of a session that reads or writes ``paths``: empty unless one
    is on S3. The caller applies the user's configuration after it (the user's keys win)."""
    paths = list(paths)
    if not uses_s3(paths):
        return {}
    hadoop = {
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",  # s3:// URIs as they are, served by S3A
        "fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
        "fs.s3a.aws.credentials.provider": CREDENTIALS,
        "fs.s3a.committer.name": "magic",
        "fs.s3a.committer.magic.enabled": "true",
        # a task's files listed in one .pendingset at its commit, not a .pending object each (Hadoop 3.3.5+)
        "fs.s3a.committer.magic.track.commits.in.memory.enabled": "true",
        "mapreduce.outputcommitter.factory.scheme.s3": COMMITTER_FACTORY,
        "mapreduce.outputcommitter.factory.scheme.s3a": COMMITTER_FACTORY,
    } | endpoint_conf(environ)
    return {
        "spark.jars": ",".join(str(p) for p in s3a_jars()),
        "spark.sql.sources.commitProtocolClass": "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol",
        "spark.sql.parquet.output.committer.class":
            "org.apache.spark.internal.io.cloud.BindingParquetOutputCommitter",
        **{f"spark.hadoop.{key}": value for key, value in hadoop.items()},
    }


def warm(spark, paths: Iterable[str]) -> None:
    """Start S3A for the first ``s3://`` path of ``paths`` on a background thread: its classes, the
    SDK's client and the bucket's first answer (about 1.5 s of a JVM's first use of S3) then overlap
    whatever the caller does next instead of the first query's. Hadoop caches the filesystem per
    bucket, so the queries after use the same one. Nothing is reported from the thread: a failure
    here fails again, with its message, where the path is used."""
    import threading

    first = next((str(p) for p in paths if urlsplit(str(p)).scheme.lower() in SCHEMES), None)
    if first is None:
        return
    uri = "s3a://" + first.split("://", 1)[1]

    def start() -> None:
        try:
            jvm = spark.sparkContext._jvm
            path = jvm.org.apache.hadoop.fs.Path(uri)
            path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(path)
        except BaseException:  # noqa: BLE001 - see the docstring
            pass

    threading.Thread(target=start, name="s3a-warm", daemon=True).start()


def submit_arguments(environ=os.environ) -> list[str]:
    """The ``spark-submit`` arguments of a job that reads or writes ``s3://``: ``--jars`` (fetched once)
    and a ``--conf`` per setting of :func:`spark_conf`, from this environment (never a credential)."""
    args = []
    for key, value in spark_conf(["s3://"], environ).items():
        args += ["--jars", value] if key == "spark.jars" else ["--conf", f"{key}={value}"]
    return args


def main() -> int:
    """``spark-submit $(python -m analytics.spark.objectstore) job.py ...``: the arguments, the jars
    fetched first when the cache lacks them (``scripts/setup.sh`` runs it at install)."""
    try:
        print(" ".join(submit_arguments()))
    except ConnectorUnavailable as e:
        print(f"segaudit: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
