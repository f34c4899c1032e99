"""The data dir configures the audit: the KRaft metadata log's configs (``cluster_configs``), a
broker's ``server.properties``, and which setting came from where.

Unit tests on a real metadata log of the corpus and on hand-built ones; the resolution's precedence
without Spark; one real broker (module-scoped, KRaft 4.4.0): a compacted topic the cleaner thinned
and a dynamic producer.id.expiration.ms, audited without a flag."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pyarrow as pa
import pytest

from analytics.export.configs import cluster_configs
from analytics.kafka.metadata import (
    CONFIG_RECORD, REMOVE_TOPIC_RECORD, TOPIC_RECORD, ClusterConfigs, apply_records, decode_record, is_known,
)
from analytics.kafka.writer import RecordSpec, build_batch, build_control_batch, segment_file_name, write_file
from tests.conftest import CORPUS
from tests.outs import table_dir

METADATA_LOG = CORPUS / "Danielowo2000__BigDataTechnologies-Version-2" / "kafka_data" / "__cluster_metadata-0"
TOPIC_ID = bytes(range(16))


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _string(s: str | None) -> bytes:
    return b"\x00" if s is None else _uvarint(len(s.encode()) + 1) + s.encode()


def _frame(api_key: int, body: bytes, version: int = 0) -> bytes:
    return _uvarint(1) + _uvarint(api_key) + _uvarint(version) + body + b"\x00"  # no tagged fields


def config(rtype: int, rname: str, name: str, value: str | None) -> bytes:
    return _frame(CONFIG_RECORD, struct.pack(">b", rtype) + _string(rname) + _string(name) + _string(value))


def topic(name: str, tid: bytes = TOPIC_ID) -> bytes:
    return _frame(TOPIC_RECORD, _string(name) + tid)


def remove_topic(tid: bytes = TOPIC_ID) -> bytes:
    return _frame(REMOVE_TOPIC_RECORD, tid)


def _records(values: list[bytes | None]) -> pa.Table:
    return pa.table({"offset": list(range(len(values))), "value": values, "is_control": [False] * len(values)})


def test_config_records_of_a_real_metadata_log_decode():
    """A ConfigRecord of the corpus's metadata log, byte for byte, and the state at the log's end:
    the values kafka-configs would describe for the corpus's topics."""
    if not METADATA_LOG.is_dir():
        pytest.skip(f"corpus not found at {CORPUS}")
    from analytics.kafka.logdir import read_segment

    read = read_segment(METADATA_LOG / "00000000000000000000.log", records=True)
    values = [v for v, c in zip(read.records.column("value").to_pylist(), read.records.column("is_control").to_pylist())
              if not c and v[1] == CONFIG_RECORD]
    first = decode_record(values[0])
    assert (first.api_key, first.version) == (CONFIG_RECORD, 0)
    assert set(first.fields) == {"ResourceType", "ResourceName", "Name", "Value"}
    assert first.fields["ResourceType"] == 2 and first.fields["ResourceName"] in values[0].decode("latin-1")

    rows, errors, read_from = cluster_configs([str(METADATA_LOG.parent)])
    got = {(r["resource_type"], r["resource_name"], r["name"]): r["value"] for r in rows}
    assert errors == [] and len(rows) == 34
    assert got[("topic", "CURRENTLOCATION", "cleanup.policy")] == "compact"
    assert got[("topic", "locations", "retention.ms")] == "604800000"
    assert got[("topic", "__consumer_offsets", "cleanup.policy")] == "compact"
    [note] = read_from.values()
    assert note["snapshot"] is None and note["end_offset"] == 16594 and note["skipped"] == 0
    assert note["records"] == 16593  # every record but the one control record


def test_deletions_topic_removals_and_aborted_metadata_transactions():
    state = ClusterConfigs()
    errors = apply_records(state, _records([
        topic("orders"), config(2, "orders", "cleanup.policy", "compact"),
        config(2, "orders", "retention.ms", "1000"), config(2, "orders", "retention.ms", None),  # deleted
        config(4, "", "producer.id.expiration.ms", "60000"), config(4, "1", "producer.id.expiration.ms", "5000"),
        topic("gone", b"\x01" * 16), config(2, "gone", "cleanup.policy", "compact"), remove_topic(b"\x01" * 16),
        _frame(23, _string(None)), config(2, "orders", "cleanup.policy", "delete"), _frame(25, b""),  # aborted
        _frame(23, _string(None)), config(2, "orders", "segment.ms", "100"), _frame(24, b""),  # committed
    ]), "f")
    assert errors == []
    assert {k: v[0] for k, v in state.configs.items()} == {
        ("topic", "orders", "cleanup.policy"): "compact", ("topic", "orders", "segment.ms"): "100",
        ("broker", "", "producer.id.expiration.ms"): "60000", ("broker", "1", "producer.id.expiration.ms"): "5000"}
    assert state.end_offset == 15 and state.skipped == 0


def test_unknown_types_and_versions_are_skipped_and_counted_a_corrupt_record_is_an_error():
    unknown_version = _frame(CONFIG_RECORD, b"whatever", version=7)
    unknown_type = _frame(99, b"")
    truncated = config(2, "orders", "cleanup.policy", "compact")[:-4]
    assert not is_known(decode_record(unknown_version)) and not is_known(decode_record(unknown_type))
    state = ClusterConfigs()
    errors = apply_records(state, _records([unknown_version, unknown_type, truncated, b"\x05\x04\x00",
                                            config(2, "orders", "cleanup.policy", "compact")]), "f")
    assert [e.error_kind for e in errors] == ["record_decode", "record_decode"]  # truncated, frame version 5
    assert "offset 2" in errors[0].message and "offset 3" in errors[1].message
    assert state.skipped == 2 and {k: v[0] for k, v in state.configs.items()} == {
        ("topic", "orders", "cleanup.policy"): "compact"}


def write_metadata_dir(log_dir: Path, log: list[bytes], snapshot: tuple[int, list[bytes]] | None = None,
                       node_id: int = 1) -> Path:
    """A log dir holding ``__cluster_metadata-0``: one segment of ``log`` (offsets from the snapshot's
    end offset, else 0) and the snapshot ``(end offset, values)``, and its meta.properties."""
    part = log_dir / "__cluster_metadata-0"
    part.mkdir(parents=True)
    (log_dir / "meta.properties").write_text(f"version=1\nnode.id={node_id}\ncluster.id=x\n")
    start = 0
    if snapshot is not None:
        start, values = snapshot
        write_file(part / f"{start:020d}-{1:010d}.checkpoint", [
            build_control_batch(0, "SNAPSHOT_HEADER", producer_id=-1, producer_epoch=-1, timestamp=0,
                                value=bytes(14), is_transactional=False),
            *[build_batch(i + 1, [RecordSpec(value=v)]) for i, v in enumerate(values)]])
    write_file(part / segment_file_name(start), [build_batch(start + i, [RecordSpec(value=v)]) for i, v in enumerate(log)])
    return part


def test_a_snapshot_holds_the_state_below_its_offset_the_log_goes_on_from_it(tmp_path):
    write_metadata_dir(tmp_path / "d", snapshot=(100, [topic("orders"), config(2, "orders", "cleanup.policy", "compact"),
                                                       config(2, "orders", "retention.ms", "1")]),
                       log=[config(2, "orders", "retention.ms", None), config(4, "", "x", "1")], node_id=3)
    rows, errors, read = cluster_configs([str(tmp_path / "d")])
    assert errors == []
    assert [(r["resource_type"], r["resource_name"], r["name"], r["value"], r["offset"], r["node_id"]) for r in rows] == [
        ("broker", "", "x", "1", 101, 3), ("topic", "orders", "cleanup.policy", "compact", 2, 3)]
    [note] = read.values()
    assert note["snapshot"] == f"{100:020d}-{1:010d}.checkpoint" and note["end_offset"] == 102


def test_an_incremental_export_gives_the_table_a_full_one_gives(tmp_path):
    """The metadata log grew after an export (a config changed, one deleted, a new snapshot): the
    incremental export's cluster_configs equals a full export's, and holds the new state."""
    import pyarrow.parquet as pq

    from analytics.export import export

    part = write_metadata_dir(tmp_path / "d", log=[topic("orders"), config(2, "orders", "cleanup.policy", "compact"),
                                                   config(4, "", "producer.id.expiration.ms", "1000")])
    out = str(tmp_path / "out")
    export(None, [str(tmp_path / "d")], out)
    segment = part / segment_file_name(0)
    with open(segment, "ab") as f:  # the log goes on
        f.write(build_batch(3, [RecordSpec(value=config(2, "orders", "cleanup.policy", "compact,delete"))]))
        f.write(build_batch(4, [RecordSpec(value=config(4, "", "producer.id.expiration.ms", None))]))
    export(None, [str(tmp_path / "d")], out, incremental=True)
    export(None, [str(tmp_path / "d")], str(tmp_path / "full"))
    got, want = (sorted(pq.read_table(str(table_dir(o, "cluster_configs"))).to_pylist(), key=str) for o in (out, str(tmp_path / "full")))
    assert got == want
    assert [(r["name"], r["value"], r["offset"]) for r in got] == [("cleanup.policy", "compact,delete", 3)]


# -- the resolution: flag > config > cluster_metadata > server.properties > default --------------------
def _row(rtype: str, rname: str, name: str, value: str, log_dir: str = "/d", end: int = 10, node: int = 1) -> dict:
    return {"resource_type": rtype, "resource_name": rname, "name": name, "value": value, "offset": 0,
            "log_dir": log_dir, "node_id": node, "end_offset": end, "file": "f"}


def test_each_setting_takes_the_highest_source_that_gives_it(tmp_path):
    from analytics.audit.config import AuditConfig, load_config
    from analytics.audit.settings import read_server_properties, resolve

    server = tmp_path / "server.properties"
    server.write_text("# static\nproducer.id.expiration.ms = 1000\ntransaction.max.timeout.ms: 2000\n"
                      "log.cleanup.policy=compact\\\n,delete\nlog.message.timestamp.type LogAppendTime\n")
    props = read_server_properties(server)
    assert props["log.cleanup.policy"] == "compact,delete" and props["transaction.max.timeout.ms"] == "2000"
    cluster = [_row("topic", "a", "cleanup.policy", "compact"), _row("topic", "b", "message.timestamp.type", "CreateTime"),
               _row("broker", "", "producer.id.expiration.ms", "3000"), _row("broker", "1", "producer.id.expiration.ms", "4000"),
               _row("broker", "2", "producer.id.expiration.ms", "5"),  # a broker whose log dir is not exported
               _row("topic", "a", "cleanup.policy", "delete", log_dir="/stale", end=5)]  # a metadata log behind
    toml = tmp_path / "audit.toml"
    toml.write_text('[cleanup_policy]\n"c" = "delete"\n')
    given = load_config(toml).with_overrides(cleanup_policy={"c": "delete", "d": "compact"})
    config, provenance = resolve(given, ["a", "b", "c", "d", "e"], cluster, props)
    assert config.producer_id_expiration_ms == 4000  # the exported broker's own entry beats the cluster default
    assert provenance["producer_id_expiration_ms"] == {"value": 4000, "source": "cluster_metadata",
                                                       "name": "producer.id.expiration.ms"}
    assert config.transaction_max_timeout_ms == 2000
    assert provenance["transaction_max_timeout_ms"]["source"] == "server.properties"
    assert config.cleanup_policy == {"a": "compact", "b": "compact,delete", "c": "delete", "d": "compact", "e": "compact,delete"}
    assert config.compacted_topics() == ["a", "b", "d", "e"]
    assert provenance["cleanup_policy"]["topics"] == {"flag": ["d"], "config": ["c"], "cluster_metadata": ["a"],
                                                      "server.properties": ["b", "e"]}
    assert config.message_timestamp_type == {"a": "LogAppendTime", "b": "CreateTime", "c": "LogAppendTime",
                                             "d": "LogAppendTime", "e": "LogAppendTime"}
    # nothing but the defaults: the profile's expiration, no cleanup policy
    config, provenance = resolve(AuditConfig(), ["a"], [], None)
    assert config.cleanup_policy == {} and config.expiration_ms == 86_400_000
    assert provenance["producer_id_expiration_ms"] == {"value": 86_400_000, "source": "default",
                                                       "name": "producer.id.expiration.ms"}
    assert provenance["cleanup_policy"]["topics"] == {"default": ["a"]}
    # a library caller's own AuditConfig: its values count as a configuration file's
    config, provenance = resolve(AuditConfig(producer_id_expiration_ms=9, cleanup_policy={"a": "delete"}), ["a"],
                                 cluster, props)
    assert config.producer_id_expiration_ms == 9 and provenance["producer_id_expiration_ms"]["source"] == "config"
    assert config.cleanup_policy == {"a": "delete"} and provenance["cleanup_policy"]["topics"] == {"config": ["a"]}
    # a flag beats the data dir
    config, provenance = resolve(AuditConfig().with_overrides(producer_id_expiration_ms=7), [], cluster, props)
    assert config.producer_id_expiration_ms == 7 and provenance["producer_id_expiration_ms"]["source"] == "flag"


def test_flags_and_the_file_name_what_they_give(tmp_path):
    from analytics.cli.options import audit_config
    from analytics.cli.parser import parser
    from analytics.errors import UsageError

    server = tmp_path / "server.properties"
    server.write_text("log.cleanup.policy=compact\n")
    toml = tmp_path / "audit.toml"
    toml.write_text(f'server_properties = "{server}"\ntransaction_max_timeout_ms = 5\n[message_timestamp_type]\n"a" = "CreateTime"\n')
    args = parser().parse_args(["audit", "out", "--config", str(toml), "--message-timestamp-type", "b=LogAppendTime",
                                "--producer-id-expiration-ms", "9"])
    config = audit_config(args)
    assert config.message_timestamp_type == {"a": "CreateTime", "b": "LogAppendTime"}
    assert config.given["message_timestamp_type"] == {"a": "config", "b": "flag"}
    assert config.given["transaction_max_timeout_ms"] == "config" and config.given["producer_id_expiration_ms"] == "flag"
    assert config.server_properties == str(server)
    server.unlink()  # named by the file and gone: a usage error before anything runs
    with pytest.raises(UsageError, match="server.properties"):
        audit_config(parser().parse_args(["audit", "out", "--config", str(toml)]))


def test_a_later_audit_resolves_again_what_the_data_dir_gave():
    """The previous audit's configuration is made again with what the user gave only: a setting the
    data dir gave is resolved from the new export."""
    from analytics.audit.config import recorded_config

    summary = {"configuration": {"producer_id_expiration_ms": 3000, "transaction_max_timeout_ms": 60000,
                                 "cleanup_policy": {"a": "compact", "b": "compact"}},
               "settings": {"producer_id_expiration_ms": {"value": 3000, "source": "cluster_metadata"},
                            "transaction_max_timeout_ms": {"value": 60000, "source": "flag"},
                            "cleanup_policy": {"value": {"a": "compact", "b": "compact"},
                                               "topics": {"config": ["a"], "cluster_metadata": ["b"]}}}}
    config = recorded_config(summary)
    assert config.producer_id_expiration_ms is None and config.transaction_max_timeout_ms == 60000
    assert config.cleanup_policy == {"a": "compact"}
    assert config.given["transaction_max_timeout_ms"] == "flag" and config.given["cleanup_policy"] == {"a": "config"}
    # a summary from before settings were resolved: the defaults it recorded are not taken for given values
    older = recorded_config({"configuration": {"profile": "3.9", "producer_id_expiration_ms": 86_400_000,
                                               "transaction_max_timeout_ms": 900_000, "cleanup_policy": {"a": "compact"}}})
    assert older.producer_id_expiration_ms is None and "producer_id_expiration_ms" not in older.given
    assert "transaction_max_timeout_ms" not in older.given and older.given["cleanup_policy"] == {"a": "config"}
    assert recorded_config({"configuration": {"producer_id_expiration_ms": 5000}}).given["producer_id_expiration_ms"] == "config"



def test_the_report_says_where_each_setting_came_from():
    from analytics.report.summary import configuration

    html = configuration({"summary": {
        "configuration": {"profile": "4.x", "producer_id_expiration_ms": 60000, "cleanup_policy": {"a": "compact"}},
        "settings": {"producer_id_expiration_ms": {"value": 60000, "source": "cluster_metadata",
                                                   "name": "producer.id.expiration.ms"},
                     "cleanup_policy": {"value": {"a": "compact"}, "name": "cleanup.policy", "default": "delete",
                                        "topics": {"cluster_metadata": ["a"], "default": ["b", "c<"]}}}}})
    assert "<th>from</th>" in html
    assert '<td>cluster_metadata <span class="muted">(producer.id.expiration.ms)</span></td>' in html
    assert '<td>cluster_metadata: a<br>default: b, c&lt; <span class="muted">(cleanup.policy)</span></td>' in html
    assert "<td>4.x</td><td>—</td>" in html  # a setting the brokers do not give

# -- a real broker ------------------------------------------------------------------------------------
BROKER_VERSION = "4.4.0"
COMPACTED = "compacted"
EXPIRATION_MS = 3_600_000  # set for the cluster with the admin client: a dynamic broker config


@pytest.fixture(scope="module")
def compacted_data_dir(tmp_path_factory):
    """One KRaft node: a compacted topic the cleaner thinned (whole batches of an idempotent producer
    removed) and producer.id.expiration.ms set for the cluster; stopped cleanly. Its log dir."""
    from kafka.admin import ConfigResource, ConfigResourceType

    from tests import broker_scenarios as sc
    from tests.kafka_cluster import KafkaCluster, require_jars

    require_jars(BROKER_VERSION)
    root = tmp_path_factory.mktemp("cluster-configs")
    with KafkaCluster(BROKER_VERSION, root / "kafka", config={"log.cleaner.min.compaction.lag.ms": "0"}) as cluster:
        admin = cluster.admin()
        try:  # the cluster default (resource name ""), which kafka-python's alter_configs refuses to name
            default = ConfigResource(ConfigResourceType.BROKER, "", configs={"producer.id.expiration.ms": str(EXPIRATION_MS)})
            request = admin._alter_configs_request([default], incremental=True)
            answer = admin._manager.run(admin._manager.send, request)
            assert [r[0] for r in answer.responses] == [0], answer
        finally:
            admin.close()
        cluster.create_topic(COMPACTED, cleanup_policy="compact", segment_ms=100, min_cleanable_dirty_ratio=0.01,
                             delete_retention_ms=100)
        facts = sc.Facts("compaction", COMPACTED, "kafka-python, idempotent")
        producer = sc.idempotent_producer(cluster)
        for i in range(21):  # every other batch rewrites one key: the cleaner removes those batches whole
            sc.send_each(producer, COMPACTED, range(i, i + 1), facts, key="hot" if i % 2 == 0 else f"k{i}")
            time.sleep(0.03)
        time.sleep(0.2)
        last = sc.send_each(producer, COMPACTED, range(21, 22), facts, key="hot")  # rolls the segment
        producer.close()
        sc.wait_for_cleaning(cluster.node(1).log_dir, COMPACTED, beyond=last[0] - 1)
    return cluster.node(1).log_dir


def _segaudit(*args: str) -> tuple[int, str]:
    """``segaudit ARGS`` in this process (the tests' Spark session): exit code and stderr."""
    from tests.commands import segaudit_here

    ran = segaudit_here(*args)
    return ran.returncode, ran.stderr


@pytest.mark.broker
@pytest.mark.spark
def test_the_data_dir_configures_the_audit(compacted_data_dir, spark, tmp_path):
    import pyarrow.parquet as pq

    from analytics.audit.job import read_audit

    out = str(tmp_path / "out")
    assert _segaudit("export", str(compacted_data_dir), "--out", out)[0] == 0
    assert _segaudit("audit", out, "--no-history")[0] == 0  # no flag, no configuration
    assert _segaudit("report", out)[0] == 0
    configs = {(r["resource_type"], r["resource_name"], r["name"]): r["value"]
               for r in pq.read_table(str(table_dir(out, "cluster_configs"))).to_pylist()}
    assert configs[("topic", COMPACTED, "cleanup.policy")] == "compact"
    assert configs[("topic", COMPACTED, "segment.ms")] == "100"
    assert configs[("broker", "", "producer.id.expiration.ms")] == str(EXPIRATION_MS)
    assert {(r["log_dir"], r["node_id"]) for r in pq.read_table(str(table_dir(out, "cluster_configs"))).to_pylist()} == {
        (str(compacted_data_dir), 1)}
    [read] = json.loads(Path(out, "_export.json").read_text())["cluster_metadata"].values()
    assert read["skipped"] == 0 and read["undecoded"] == 0, read  # every record type the broker wrote is Kafka's

    summary = read_audit(out)
    verdicts = pq.read_table(str(table_dir(out, "batch_verdicts")), filters=[("topic", "=", COMPACTED)]).to_pylist()
    holes = [v for v in verdicts if v["verdict"] == "SEQUENCE_GAP"]
    assert holes and all(v["explained_by"] == "compaction" and v["severity"] == "explained" for v in holes)
    assert summary["severities"]["violation"] == 0
    assert summary["configuration"]["cleanup_policy"][COMPACTED] == "compact"
    assert COMPACTED in summary["settings"]["cleanup_policy"]["topics"]["cluster_metadata"]
    assert summary["configuration"]["producer_id_expiration_ms"] == EXPIRATION_MS
    assert summary["settings"]["producer_id_expiration_ms"]["source"] == "cluster_metadata"
    assert summary["settings"]["transaction_max_timeout_ms"]["source"] == "default"
    page = Path(out, "report", "index.html").read_text()
    assert "cluster_metadata" in page and "producer.id.expiration.ms" in page

    # a flag beats the data dir; a server.properties the configuration names and cannot read: exit 2
    code, _ = _segaudit("audit", out, "--producer-id-expiration-ms", "7200000", "--no-history")
    assert code == 0
    summary = read_audit(out)
    assert summary["configuration"]["producer_id_expiration_ms"] == 7_200_000
    assert summary["settings"]["producer_id_expiration_ms"]["source"] == "flag"
    assert COMPACTED in summary["settings"]["cleanup_policy"]["topics"]["cluster_metadata"]
    toml = tmp_path / "audit.toml"
    toml.write_text(f'server_properties = "{tmp_path / "missing.properties"}"\n')
    code, err = _segaudit("audit", out, "--config", str(toml), "--no-history")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "missing.properties" in err
