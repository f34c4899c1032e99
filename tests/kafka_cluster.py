"""Real Apache Kafka brokers for the tests: Kafka's own jars from Maven Central, KRaft mode, loopback.

``kafka_jars(version)`` resolves ``org.apache.kafka:kafka_2.13`` and its runtime dependencies with
Maven (``tests/kafka/pom.xml``) into ``~/.cache/segaudit/kafka_2.13-<version>/`` (``SEGAUDIT_CACHE``
moves it), once: a second run downloads nothing. ``KafkaCluster`` formats KRaft storage and starts
one or three combined broker+controller nodes (``kafka.Kafka``) on free loopback ports with their log
dirs under a temporary folder, waits until every node answers a metadata request, and stops them
(``close``, also when a test fails: use it as a context manager or through a fixture). With
``controllers=N`` the quorum is N nodes of their own (``process.roles=controller``, node ids from
:data:`CONTROLLER_IDS`) and the ``nodes`` are brokers only; ``classpath`` adds jars after the broker's
(tiered storage's ``LocalTieredStorage``: ``tests/tiered_storage.py``).

Two versions, chosen by the tests' parameter: the newest 4.x release (transactions V2) and the last
3.x release (3.9, before transactions V2). ``dump_log_command(version)`` is Kafka's own
DumpLogSegments from the matching release line (``kafka.tools`` in ``kafka_2.13`` up to 4.2,
``org.apache.kafka.tools`` in ``kafka-tools`` from 4.3 on).

When the jars cannot be resolved (no Maven, no network) ``require_jars`` skips with a message that
starts with :data:`UNAVAILABLE`; ``.ci/run`` fails when it sees that message.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from analytics.spark.session import SMALL_WORK_OPTIONS
from tests.ports import free_port

HERE = Path(__file__).resolve().parent
POM = HERE / "kafka" / "pom.xml"
CACHE = Path(os.environ.get("SEGAUDIT_CACHE", Path.home() / ".cache" / "segaudit"))
UNAVAILABLE = "broker jars unavailable"


@dataclass(frozen=True)
class Release:
    """A broker release, where its DumpLogSegments lives, and the SLF4J binding its distribution ships
    beside its jars (not a dependency on Maven Central: without it a broker logs nothing at all, and one
    that exits at its start says nothing of why)."""

    version: str
    dump_log_artifact: str  # the artifact holding DumpLogSegments
    dump_log_version: str
    dump_log_class: str
    log_binding: tuple[str, ...]  # Maven coordinates (group:artifact:version) of the binding's jars

    @property
    def tv2(self) -> bool:
        """Transactions V2 (an epoch bump per transaction) with 4.x clients."""
        return int(self.version.split(".")[0]) >= 4


# The newest 4.x release and the last 3.x release. kafka-tools 4.4.0 is not on Maven Central, so the
# 4.x DumpLogSegments is the newest kafka-tools release that is (4.3.1, the same on-disk formats).
RELEASES = {
    "4.4.0": Release("4.4.0", "kafka-tools", "4.3.1", "org.apache.kafka.tools.DumpLogSegments",
                     ("org.apache.logging.log4j:log4j-slf4j-impl:2.25.5",)),
    "3.9.2": Release("3.9.2", "kafka_2.13", "3.9.2", "kafka.tools.DumpLogSegments",
                     ("org.slf4j:slf4j-reload4j:1.7.36", "ch.qos.reload4j:reload4j:1.2.25")),
}
VERSIONS = tuple(RELEASES)


class JarsUnavailable(RuntimeError):
    pass


def resolve(artifact: str, version: str) -> Path:
    """The folder of jars of ``org.apache.kafka:<artifact>:<version>`` with its runtime dependencies."""
    return cached_jars(f"{artifact}-{version}", [(
        ["dependency:copy-dependencies", "-DincludeScope=runtime", f"-Dkafka.artifact={artifact}",
         f"-Dkafka.version={version}"], "*.jar", f"org.apache.kafka:{artifact}:{version}")])


def cached_jars(name: str, steps: list[tuple[list[str], str, str]]) -> Path:
    """``CACHE/<name>``, filled once by Maven: each step is (the goal and its arguments, run with
    ``-DoutputDirectory`` the folder; a glob the folder must then match; what it resolves, for the
    error). Filled in a staging folder renamed into place when complete, so an interrupted or
    concurrent resolution never leaves a partial folder; raises ``JarsUnavailable``."""
    target = CACHE / name
    if (target / ".complete").is_file():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarsUnavailable("Maven (mvn) is not on PATH; on Debian: sudo apt-get install -y maven")
    CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=CACHE))
    for goal, expected, what in steps:
        done = subprocess.run([mvn, "-q", "-B", "-f", str(POM), *goal, f"-DoutputDirectory={staging}"],
                              capture_output=True, text=True, timeout=900)
        if done.returncode != 0 or not any(staging.glob(expected)):
            shutil.rmtree(staging, ignore_errors=True)
            lines = [ln for ln in (done.stdout + done.stderr).splitlines() if "ERROR" in ln] or ["no jar resolved"]
            raise JarsUnavailable(f"{what}: {lines[0].strip()}")
    (staging / ".complete").write_text(name)
    if target.exists() and not (target / ".complete").exists():
        shutil.rmtree(target, ignore_errors=True)  # an interrupted resolution
    try:
        staging.rename(target)
    except OSError:  # another process won the race
        shutil.rmtree(staging, ignore_errors=True)
    return target


def kafka_jars(version: str) -> Path:
    """The broker's jars (and its log binding, :func:`log_binding`, resolved with them)."""
    log_binding(version)
    return resolve("kafka_2.13", version)


def log_binding(version: str) -> Path | None:
    """The folder of the broker's SLF4J binding (:attr:`Release.log_binding`), resolved once; None for
    a version :data:`RELEASES` does not name."""
    release = RELEASES.get(version)
    if release is None:
        return None
    return cached_jars(f"kafka-logging-{version}", [
        (["dependency:copy", f"-Dartifact={coordinates}"], f"{coordinates.split(':')[1]}-*.jar", coordinates)
        for coordinates in release.log_binding])


def require_jars(version: str) -> Path:
    """The broker's jars, or skip the test saying why they could not be resolved."""
    try:
        return kafka_jars(version)
    except (JarsUnavailable, subprocess.TimeoutExpired) as e:
        pytest.skip(f"{UNAVAILABLE}: {e}")


def driven_at_once(drives: dict[str, tuple[Callable[[], object], tuple[Callable[[], object], ...]]]) -> dict:
    """Each named drive run at once, on a thread of its own (a broker's drive mostly waits on its
    clients, expiration, retention or the cleaner, so together they take the time of one): name ->
    ``(drive, needs)``, where ``needs`` resolve the jars it needs first. name -> the drive's result,
    or the reason its jars could not be resolved (for :func:`driven`)."""
    results, ready = {}, {}
    for name, (drive, needs) in drives.items():
        try:
            for need in needs:
                need()
            ready[name] = drive
        except (JarsUnavailable, subprocess.TimeoutExpired) as e:
            results[name] = f"{UNAVAILABLE}: {e}"
    with ThreadPoolExecutor(max_workers=max(len(ready), 1)) as pool:
        futures = {name: pool.submit(drive) for name, drive in ready.items()}
        for name, future in futures.items():
            results[name] = future.result()
    return results


def driven(results: dict, name: str):
    """The result of ``name``'s drive (:func:`driven_at_once`), or skip the test saying why its jars
    could not be resolved."""
    result = results[name]
    if isinstance(result, str):
        pytest.skip(result)
    return result


# The JVMs the tests start (brokers, Kafka's tools and clients) run for seconds to minutes on small
# data (DumpLogSegments over the corpus: 2.9 CPU-seconds instead of 7.8 with HotSpot's defaults).
QUICK_JVM = tuple(SMALL_WORK_OPTIONS.split())


def dump_log_command(version: str) -> list[str]:
    """``java -cp ... DumpLogSegments`` of the release line of ``version`` (append the tool's flags)."""
    release = RELEASES[version]
    jars = resolve(release.dump_log_artifact, release.dump_log_version)
    return [java(), "-Xmx512m", *QUICK_JVM, *_log_config_flags(jars), "-cp", f"{jars}/*", release.dump_log_class]


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").is_file():
        return str(Path(home, "bin", "java"))
    return shutil.which("java") or "java"




def _log_config_flags(folder: Path) -> list[str]:
    """Kafka 4.x logs with log4j2, 3.x with reload4j: both to a file (``server.log`` when ``folder`` is a
    node's), warnings and errors only (a broker's fatal error at its start is one)."""
    log4j2 = folder / "log4j2.properties"
    log4j1 = folder / "log4j.properties"
    if not log4j2.exists():
        log_file = folder / "server.log"
        log4j2.write_text(
            "rootLogger.level = WARN\nrootLogger.appenderRef.f.ref = F\n"
            "appender.f.type = File\nappender.f.name = F\n"
            f"appender.f.fileName = {log_file}\n"
            "appender.f.layout.type = PatternLayout\nappender.f.layout.pattern = [%d] %p %m (%c)%n\n"
        )
        log4j1.write_text(
            "log4j.rootLogger=WARN, F\nlog4j.appender.F=org.apache.log4j.FileAppender\n"
            f"log4j.appender.F.File={log_file}\n"
            "log4j.appender.F.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.F.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        )
    return [f"-Dlog4j2.configurationFile={log4j2}", f"-Dlog4j.configuration=file:{log4j1}"]


@dataclass
class Node:
    node_id: int
    port: int
    controller_port: int
    internal_port: int  # the inter-broker listener (never through a proxy)
    home: Path  # server.properties, logs
    log_dir: Path  # Kafka's log.dirs
    advertised_port: int | None = None  # a proxy's port, to put the proxy in every client's path
    process: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


# Broker settings every test cluster starts with: internal topics fit the cluster, rebalances and
# checks run fast. ``KafkaCluster(config=...)`` adds to them or overrides them.
BASE_CONFIG = {
    "num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "log.flush.interval.messages": "1",  # every batch reaches the file before the produce is answered
    "log.cleaner.backoff.ms": "500",
    "log.retention.check.interval.ms": "1000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3000",
    "transaction.state.log.num.partitions": "1",
    "offsets.topic.num.partitions": "1",
}


CONTROLLER_IDS = 100  # the node id of the first dedicated controller


@dataclass
class KafkaCluster:
    """``nodes`` KRaft nodes of one Kafka ``version``: each broker and controller (all voters), or with
    ``controllers`` > 0 brokers only, beside that many dedicated controllers (the voters)."""

    version: str
    root: Path
    nodes: int = 1
    config: dict[str, str] = field(default_factory=dict)
    jvm_heap: str = "512m"
    client: dict = field(default_factory=dict)  # kafka-python settings of the tests' own clients (SASL)
    controllers: int = 0  # dedicated controller nodes (process.roles=controller); 0: combined nodes
    classpath: tuple[Path, ...] = ()  # folders of jars after the broker's own
    members: list[Node] = field(default_factory=list, init=False)  # the brokers (node ids 1..nodes)
    quorum: list[Node] = field(default_factory=list, init=False)  # the dedicated controllers

    def __post_init__(self):
        self.root = Path(self.root)
        self.jars = kafka_jars(self.version)
        self.logging = log_binding(self.version)
        self.release = RELEASES.get(self.version)
        self.cluster_id = _base64_uuid()
        for i in range(1, self.nodes + 1):
            home = self.root / f"node-{i}"
            home.mkdir(parents=True, exist_ok=True)
            self.members.append(Node(i, free_port(), free_port(), free_port(), home, home / "data"))
        for i in range(CONTROLLER_IDS, CONTROLLER_IDS + self.controllers):
            home = self.root / f"controller-{i}"
            home.mkdir(parents=True, exist_ok=True)
            self.quorum.append(Node(i, free_port(), free_port(), free_port(), home, home / "data"))

    @property
    def voters(self) -> list[Node]:
        return self.quorum or self.members

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> "KafkaCluster":
        for node in self.quorum + self.members:
            self._write_properties(node)
            if not (node.log_dir / "meta.properties").exists():
                self._java(node, "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                           "-c", str(node.home / "server.properties"), "--ignore-formatted", wait=True)
        for node in self.quorum:
            self._write_properties(node)
            node.process = self._java(node, "kafka.Kafka", str(node.home / "server.properties"))
        for node in self.members:
            self.start_node(node.node_id, wait=False)
        self.wait_ready(timeout)
        return self

    def start_node(self, node_id: int, wait: bool = True, timeout: float = 90.0) -> None:
        node = self.node(node_id)
        if node.process is not None and node.process.poll() is None:
            return
        self._write_properties(node)
        node.process = self._java(node, "kafka.Kafka", str(node.home / "server.properties"))
        if wait:
            self._wait_node(node, time.monotonic() + timeout)

    def stop_node(self, node_id: int, timeout: float = 60.0) -> None:
        """A clean shutdown (SIGTERM: the broker writes its producer snapshots and a clean-shutdown file)."""
        node = self.node(node_id)
        if node.process is None:
            return
        if node.process.poll() is None:
            node.process.terminate()
            try:
                node.process.wait(timeout)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
        node.process = None

    def kill_node(self, node_id: int) -> None:
        """A crash (SIGKILL: no snapshot, no clean-shutdown file)."""
        node = self.node(node_id)
        if node.process is not None:
            node.process.kill()
            node.process.wait()
            node.process = None

    def close(self, timeout: float = 60.0) -> None:
        """Stops every node cleanly, all at once (one by one, the last nodes wait for a quorum that is
        gone); dedicated controllers after the brokers, whose controlled shutdown asks them."""
        deadline = time.monotonic() + timeout
        for group in (self.members, self.quorum):
            running = [n for n in group if n.process is not None and n.process.poll() is None]
            for node in running:
                node.process.terminate()
            for node in running:
                try:
                    node.process.wait(max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait()
            for node in group:
                node.process = None

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- addresses ------------------------------------------------------------------------------
    def node(self, node_id: int) -> Node:
        return self.members[node_id - 1]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.members if n.process is not None) or self.members[0].address

    @property
    def log_dirs(self) -> list[Path]:
        return [n.log_dir for n in self.members]

    def server_log(self, node_id: int = 1) -> str:
        path = self.node(node_id).home / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- clients --------------------------------------------------------------------------------
    def admin(self, **kwargs):
        from kafka.admin import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="segaudit-tests",
                                request_timeout_ms=30000, **{**self.client, **kwargs})

    def create_topic(self, name: str, partitions: int = 1, replication: int = 1, **configs: str) -> None:
        from kafka.admin import NewTopic

        admin = self.admin()
        try:
            admin.create_topics([NewTopic(name, partitions, replication,
                                          topic_configs={k.replace("_", "."): str(v) for k, v in configs.items()})])
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # leaders elected, and answering, on every partition
                meta = admin.describe_topics([name])[0]
                if meta["error_code"] == 0 and meta["partitions"] and all(
                        _leader(p) >= 0 for p in meta["partitions"]) and _leaders_answer(admin, name, partitions):
                    return
                time.sleep(0.1)
            raise TimeoutError(f"topic {name} has no leader after 30 s")
        finally:
            admin.close()

    # -- internals ------------------------------------------------------------------------------
    def _write_properties(self, node: Node) -> None:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.voters)
        advertised = node.advertised_port or node.port
        replicas = str(min(self.nodes, 3))
        if node in self.quorum:
            roles, listeners, advertised_listeners = ("controller", f"CONTROLLER://127.0.0.1:{node.controller_port}",
                                                      None)
        else:
            roles = "broker" if self.quorum else "broker,controller"
            listeners = f"PLAINTEXT://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{node.internal_port}"
            if not self.quorum:
                listeners += f",CONTROLLER://127.0.0.1:{node.controller_port}"
            advertised_listeners = f"PLAINTEXT://127.0.0.1:{advertised},INTERNAL://127.0.0.1:{node.internal_port}"
        props = {
            "process.roles": roles,
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": listeners,
            **({"advertised.listeners": advertised_listeners} if advertised_listeners else {}),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.log_dir),
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": "1",
            "default.replication.factor": replicas,
            **BASE_CONFIG,
            **self.config,
        }
        (node.home / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _java(self, node: Node, main: str, *args: str, wait: bool = False):
        folders = (self.jars, *([self.logging] if self.logging else []), *self.classpath)
        classpath = os.pathsep.join(f"{folder}/*" for folder in folders)
        cmd = [java(), f"-Xmx{self.jvm_heap}", "-Xss1m", *QUICK_JVM,
               "-Djava.awt.headless=true", *_log_config_flags(node.home), "-cp", classpath, main, *args]
        out = open(node.home / "stdout.log", "ab")
        if wait:
            done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=120)
            out.close()
            if done.returncode != 0:
                tail = (node.home / "stdout.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{main} {' '.join(args[:1])} failed ({done.returncode}): {tail}")
            return None
        # a new session: a test's Ctrl-C does not reach the broker before close() stops it cleanly
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        for node in self.members:
            self._wait_node(node, deadline)

    def _wait_node(self, node: Node, deadline: float) -> None:
        """Until the node answers a metadata request with every running node registered."""
        from kafka.admin import KafkaAdminClient

        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if node.process is not None and node.process.poll() is not None:
                raise RuntimeError(f"Kafka {self.version} node {node.node_id} exited with {node.process.returncode}: "
                                   f"{self.server_log(node.node_id)[-3000:]}")
            try:
                admin = KafkaAdminClient(bootstrap_servers=node.address, request_timeout_ms=5000, **self.client)
                try:
                    brokers = admin.describe_cluster()["brokers"]
                finally:
                    admin.close()
                running = sum(1 for n in self.members if n.process is not None and n.process.poll() is None)
                if len(brokers) >= running:
                    return
            except Exception as e:  # not up yet
                last_error = e
            time.sleep(0.3)
        raise TimeoutError(f"Kafka {self.version} node {node.node_id} did not answer: {last_error}; "
                           f"{self.server_log(node.node_id)[-2000:]}")


def _leaders_answer(admin, topic: str, partitions: int) -> bool:
    """ListOffsets answers on every partition (right after creation a leader may still say NOT_LEADER)."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    try:
        admin.list_partition_offsets({TopicPartition(topic, p): OffsetSpec.LATEST for p in range(partitions)},
                                     timeout_ms=2000)
        return True
    except Exception:
        return False


def _leader(partition: dict) -> int:
    return partition.get("leader", partition.get("leader_id", -1))


def _base64_uuid() -> str:
    """A cluster id as Kafka's ``Uuid.randomUuid`` makes one: never starting with "-", which the
    storage tool's argument parser would take for an option."""
    import base64

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def copy_log_dir(src: Path, dst: Path) -> Path:
    """A copy of a (possibly running) broker's log dir, as an operator's ``cp -r`` would take it."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.lock"))
    return dst
