"""Kafka tiered storage (KIP-405) in the tests: Kafka's own test RemoteStorageManager, its broker
settings, and its remote segments read as a log dir.

``LocalTieredStorage`` keeps remote segments as files of a local folder. It ships in the test jars of
kafka-storage and kafka-clients, on Maven Central for 4.3.1 only (``tiered_storage_jars`` resolves them
with Maven into ``~/.cache/segaudit/tiered-storage-<version>/``, once), and a 4.4.0 broker cannot load
them (``org.apache.kafka.common.utils.LogContext`` moved to ``...utils.internals`` in 4.4): a tiered
node runs :data:`TIERED_STORAGE_VERSION`, with the jars on its classpath (``KafkaCluster(classpath=...)``)
and :func:`broker_config`.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from tests.kafka_cluster import cached_jars

TIERED_STORAGE_VERSION = "4.3.1"
LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"


def tiered_storage_jars(version: str = TIERED_STORAGE_VERSION) -> Path:
    """The folder holding ``kafka-storage-<version>-test.jar`` and ``kafka-clients-<version>-test.jar``."""
    return cached_jars(f"tiered-storage-{version}", [
        (["dependency:copy", f"-Dartifact=org.apache.kafka:{artifact}:{version}:jar:test"], f"{artifact}-*.jar",
         f"org.apache.kafka:{artifact}:{version}:test") for artifact in ("kafka-storage", "kafka-clients")])


def broker_config(remote: Path, metadata_replicas: int = 1) -> dict[str, str]:
    """A broker's tiered-storage settings: the remote tier in ``remote``, its manager's tasks every second."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
        "rsm.config.dir": str(remote),
        "remote.log.metadata.manager.listener.name": "INTERNAL",
        "rlmm.config.remote.log.metadata.topic.replication.factor": str(metadata_replicas),
        "remote.log.manager.task.interval.ms": "1000",
    }


def wait_local_start(folder: Path, above: int, timeout: float = 120) -> int:
    """The base offset of the partition's first local segment, once it is above ``above`` (the remote
    tier holds what was below and the local copies are gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        segments = sorted(int(f.stem) for f in folder.glob("*.log"))
        if segments and segments[0] > above:
            return segments[0]
        time.sleep(0.5)
    raise TimeoutError(f"{folder.name}: no local segment deletion within {timeout} s")


def remote_as_log_dir(remote: Path, target: Path) -> tuple[Path, int]:
    """``LocalTieredStorage``'s files (``kafka-tiered-storage/<topic>-<partition>-<topic id>/<offset>-<uuid>.log``)
    copied as a log dir that segaudit reads (``<topic>-<partition>/<offset>.log``); and the last offset they hold."""
    from analytics.kafka.logdir import read_segment

    last = -1
    for folder in (remote / "kafka-tiered-storage").iterdir():
        topic_partition = folder.name[:-23]  # less "-<topic id>" (22 characters of base64, "-" among them)
        out = target / topic_partition
        out.mkdir(parents=True, exist_ok=True)
        for f in folder.glob("*.log"):
            copy = out / f"{f.name.split('-')[0]}.log"
            shutil.copyfile(f, copy)
            last = max([last, *read_segment(copy).batches.column("last_offset").to_pylist()])
    return target, last
