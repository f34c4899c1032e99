"""A new local session's heap is a share of the machine unless the user set it; a cluster manager,
spark-submit or a Spark Connect server keeps its own. No JVM starts: the options ``get_spark`` would
launch with are caught before the launch."""

from __future__ import annotations

import pytest

from analytics.spark import classdata, memory, session

GIB = 1024 * 1024 * 1024
MACHINE = 16 * GIB


class Launched(Exception):
    """The options a session would have started with."""

    def __init__(self, options):
        super().__init__()
        self.options = dict(options)


@pytest.fixture
def launch(monkeypatch, tmp_path):
    """``get_spark``'s options, for a machine of 16 GiB, with no user setting of the driver's memory in
    the environment and an empty Spark configuration folder."""
    from pyspark.sql import SparkSession

    for name in (*memory.MEMORY_ENVIRONMENT, "PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    monkeypatch.setattr(memory, "physical_memory", lambda: MACHINE)
    monkeypatch.setattr(session, "check_java", lambda: ("java", ""))
    monkeypatch.setattr(session, "class_archive", lambda java=None: classdata.Archive())
    monkeypatch.setattr(session, "_launch_jvm", lambda app, master, options: None)
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))

    def caught(self):
        raise Launched(self._options)

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", caught)

    def options(master=None, **kwargs):
        with pytest.raises(Launched) as launched:
            session.get_spark(master, **kwargs)
        return launched.value.options

    return options


@pytest.mark.parametrize("master", [None, "local", "local[2]", "local[*]"])
def test_a_local_session_gets_half_the_machine(launch, master):
    assert launch(master)[memory.DRIVER_MEMORY] == "8192m"


def test_the_users_conf_wins(launch):
    assert launch(conf={"spark.driver.memory": "3g"})[memory.DRIVER_MEMORY] == "3g"


@pytest.mark.parametrize("variable", memory.MEMORY_ENVIRONMENT)
def test_the_environment_of_sparks_launcher_wins(launch, monkeypatch, variable):
    monkeypatch.setenv(variable, "5g")
    assert memory.DRIVER_MEMORY not in launch()


@pytest.mark.parametrize("args", ["--driver-memory 5g pyspark-shell", "--driver-memory=5g pyspark-shell",
                                  "--conf spark.driver.memory=5g pyspark-shell"])
def test_pyspark_submit_args_win(launch, monkeypatch, args):
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", args)
    assert memory.DRIVER_MEMORY not in launch()


def test_spark_defaults_win(launch, monkeypatch, tmp_path):
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("# local settings\nspark.driver.memory   6g\n")
    assert memory.DRIVER_MEMORY not in launch()
    (conf_dir / "spark-defaults.conf").write_text("spark.executor.memory 6g\n")
    assert launch()[memory.DRIVER_MEMORY] == "8192m"
    properties = tmp_path / "mine.properties"
    properties.write_text("spark.driver.memory=6g\n")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--properties-file {properties} pyspark-shell")
    assert memory.DRIVER_MEMORY not in launch()


@pytest.mark.parametrize("master", ["spark://spark-master:7077", "yarn", "k8s://https://kube:6443",
                                    "local-cluster[2,1,1024]"])
def test_a_cluster_manager_decides(launch, master):
    assert memory.DRIVER_MEMORY not in launch(master)


def test_spark_submit_and_spark_connect_decide(launch, monkeypatch):
    assert memory.DRIVER_MEMORY not in launch(remote="sc://localhost:15002")
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    assert memory.DRIVER_MEMORY not in launch()


def test_the_share_is_bounded():
    assert memory.driver_memory_mib(int(1.5 * GIB)) is None  # Spark's 1 GiB kept, never less
    assert memory.driver_memory_mib(2 * GIB) is None
    assert memory.driver_memory_mib(3 * GIB) == 1536
    assert memory.driver_memory_mib(512 * GIB) == memory.DRIVER_MEMORY_CAP_MIB
    assert memory.driver_memory_conf(None, {}, {}, 2 * GIB) == {}


@pytest.mark.parametrize("v2, v1, expected", [
    ("4294967296\n", None, 4 * GIB),
    ("max\n", None, MACHINE),
    (None, "3221225472\n", 3 * GIB),
    (None, "9223372036854771712\n", MACHINE),  # v1's "no limit"
])
def test_a_containers_limit_counts_when_lower(monkeypatch, tmp_path, v2, v1, expected):
    monkeypatch.setattr(memory.os, "sysconf", lambda name: {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": MACHINE // 4096}[name])
    if v2 is not None:
        (tmp_path / "memory.max").write_text(v2)
    if v1 is not None:
        (tmp_path / "memory").mkdir()
        (tmp_path / "memory" / "memory.limit_in_bytes").write_text(v1)
    assert memory.physical_memory(tmp_path) == expected


def test_this_machine_is_read():
    assert memory.physical_memory() > 0


def test_a_tasks_memory_is_its_share_of_the_heap(spark):
    """The session's JVM heap less Spark's reserve, times the memory fraction, over its cores."""
    from analytics.spark.memory import task_memory

    heap = spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory()
    expected = (heap - 300 * 2**20) * 0.6 // spark.sparkContext.defaultParallelism
    assert abs(task_memory(spark) - expected) <= 1
