"""The options of an export over the protocol, against one real broker: behind SASL and ACLs (the
credentials of a client properties file work, and never show up in what segaudit prints or writes;
a refused login and a principal the ACLs do not allow are each one line and exit 2), and the
sub-ranges of ``--from-offset``, ``--from-time`` and ``--until-time``.

One broker (the newest 4.x release) whose client listener speaks SASL_PLAINTEXT with PLAIN and
SCRAM-SHA-256, and Kafka's StandardAuthorizer: ``admin`` is a super user, ``audit`` (PLAIN) and
``scrammer`` (SCRAM) may describe the cluster and describe and read the topic ``secured``,
``outsider`` may do nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.commands import assert_own_lines
from tests.conftest import REPO
from tests.kafka_cluster import VERSIONS, KafkaCluster, require_jars
from tests.outs import table_dir

pytestmark = [pytest.mark.broker, pytest.mark.spark]
WAVE = 50  # records per wave; the waves are apart in time
CORRUPTED_AT = 70  # a byte of the first batch's first record (its header is 61 bytes)
SECRET = "au-d1t-s3cret"
SCRAM_SECRET = "scr4m-s3cret"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="{user}" password="{password}";')
ADMIN = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": "admin",
         "sasl_plain_password": "admin-secret"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    from kafka import KafkaProducer
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ResourcePattern,
        ResourceType,
        UserScramCredentialUpsertion,
    )

    version = VERSIONS[0]
    require_jars(version)
    root = tmp_path_factory.mktemp("secured")
    users = f'user_admin="admin-secret" user_audit="{SECRET}" user_outsider="outsider-secret"'
    config = {
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.plaintext.plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
        "listener.name.plaintext.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",  # the brokers' own PLAINTEXT listeners are ANONYMOUS
    }
    cluster = KafkaCluster(version, root / "cluster", config=config, client=ADMIN)
    cluster.start()
    try:
        cluster.create_topic("secured", partitions=2)
        cluster.create_topic("elsewhere")
        admin = cluster.admin()
        try:
            allow = [("audit", ResourceType.CLUSTER, "kafka-cluster", ACLOperation.DESCRIBE),
                     ("audit", ResourceType.TOPIC, "secured", ACLOperation.DESCRIBE),
                     ("audit", ResourceType.TOPIC, "secured", ACLOperation.READ)]
            allow += [("scrammer", kind, name, op) for _, kind, name, op in allow]
            admin.create_acls([ACL(f"User:{user}", "*", op, ACLPermissionType.ALLOW, ResourcePattern(kind, name))
                               for user, kind, name, op in allow])
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion("scrammer", "SCRAM-SHA-256", SCRAM_SECRET)])
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, enable_idempotence=True, acks="all", **ADMIN)
        for i in range(WAVE):
            producer.send("secured", key=str(i).encode(), value=b"secret-data", partition=i % 2)
            producer.send("elsewhere", key=str(i).encode(), value=b"x")
        producer.flush()
        time.sleep(0.05)
        between = int(time.time() * 1000)  # after every record of the first wave, before the second's
        time.sleep(0.05)
        for i in range(WAVE, 2 * WAVE):
            producer.send("secured", key=str(i).encode(), value=b"secret-data", partition=i % 2)
        cluster.create_topic("corrupted")
        for i in range(3):
            producer.send("corrupted", key=str(i).encode(), value=b"a value to damage").get(timeout=30)
        producer.close()
        # a byte flipped on the broker's disk, inside the first batch's records: the broker serves it as it is
        cluster.stop_node(1)
        segment = cluster.node(1).log_dir / "corrupted-0" / "00000000000000000000.log"
        data = bytearray(segment.read_bytes())
        data[CORRUPTED_AT] ^= 0xFF
        segment.write_bytes(bytes(data))
        cluster.start_node(1)
        yield cluster, root, between
    finally:
        cluster.close()


def _properties(root: Path, user: str, password: str, mechanism: str = "PLAIN", more: str = "") -> Path:
    path = root / f"{user}-{len(list(root.glob('*.properties')))}.properties"  # (its name holds no secret)
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\nsasl.jaas.config="
                    f"{JAAS.format(user=user, password=password).replace('plain.PlainLoginModule', module)}\n{more}")
    return path


def _in_process(capsys, cluster: KafkaCluster, out: Path, properties: Path, *more: str) -> int:
    """``segaudit export kafka://...`` in this process, on the tests' Spark session; its stderr holds
    segaudit's own lines only."""
    from analytics import cli

    capsys.readouterr()
    code = cli.main(["export", f"kafka://{cluster.bootstrap}", "--out", str(out), "--client-config", str(properties),
                     "--records", *more])
    assert_own_lines(capsys.readouterr().err)
    return code


def _export(cluster: KafkaCluster, out: Path, properties: Path, *more: str, command: str = "export"
            ) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "analytics", command, f"kafka://{cluster.bootstrap}", "--out", str(out),
                           "--client-config", str(properties), "--records", "--master", "local[2]", *more],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert_own_lines(done.stderr)
    return done


def test_an_audit_principal_audits_what_the_acls_allow_and_its_secret_is_nowhere(secured, tmp_path):
    """``segaudit run kafka://...``: the whole job over the protocol; the password is in no output,
    table, manifest, summary, Data Docs page or report under OUT."""
    cluster, root, _ = secured
    out = tmp_path / "out"
    done = _export(cluster, out, _properties(root, "audit", SECRET), "--no-history", command="run")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "report" / "index.html").is_file() and (out / "summary.json").is_file()
    import pyarrow.parquet as pq

    keys = pq.read_table(str(table_dir(out, "records")), columns=["topic", "key"]).to_pylist()
    assert {r["topic"] for r in keys} == {"secured"}  # the topic it may not describe is not even listed
    assert sorted(int(r["key"]) for r in keys) == list(range(2 * WAVE))
    assert SECRET not in done.stdout + done.stderr
    for path in out.rglob("*"):  # the manifest, every table's Parquet files, everything under OUT
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("user, password, mechanism, reason", [
    ("audit", "wrong", "PLAIN", "Authentication failed: Invalid username or password"),
    ("scrammer", "wrong", "SCRAM-SHA-256", "due to invalid credentials with SASL mechanism SCRAM-SHA-256"),
    ("audit", SECRET, "SCRAM-SHA-512", "UnsupportedSaslMechanismError: the broker offers PLAIN, SCRAM-SHA-256"),
])
def test_a_refused_login_is_one_line_with_the_brokers_reason_and_exit_2(secured, tmp_path, user, password,
                                                                         mechanism, reason):
    cluster, root, _ = secured
    quick = "default.api.timeout.ms=3000\n"  # kafka-python's bootstrap retries the refused login until then
    done = _export(cluster, tmp_path / "out", _properties(root, user, password, mechanism, quick))
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert done.stderr.startswith(f"segaudit: cannot use kafka://{cluster.bootstrap}: login refused ("), \
        done.stderr
    assert reason in done.stderr and password not in done.stderr


def test_a_principal_the_acls_do_not_allow_is_one_line_and_exit_2(secured, tmp_path):
    cluster, root, _ = secured
    done = _export(cluster, tmp_path / "out", _properties(root, "outsider", "outsider-secret"), "--topics", "secured")
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert "outsider-secret" not in done.stderr
    assert "access denied" in done.stderr or "may describe" in done.stderr


def _keys_and_ranges(out: Path) -> tuple[list[int], list[tuple]]:
    import pyarrow.parquet as pq

    keys = sorted(int(k) for k in pq.read_table(str(table_dir(out, "records")), columns=["key"]).column("key").to_pylist())
    parts = json.loads((out / "_export.json").read_text())["cluster"]["partitions"]
    return keys, sorted((p["partition"], p["start"], p["end"]) for p in parts)


def test_from_time_and_until_time_cut_the_log_where_the_records_do(secured, tmp_path, capsys):
    cluster, root, between = secured
    config = _properties(root, "audit", SECRET)
    done = [_in_process(capsys, cluster, tmp_path / name, config, "--topics", "secured", option, str(between))
            for name, option in (("late", "--from-time"), ("early", "--until-time"))]
    assert done == [0, 0]
    late, late_ranges = _keys_and_ranges(tmp_path / "late")
    early, early_ranges = _keys_and_ranges(tmp_path / "early")
    assert early == list(range(WAVE)) and late == list(range(WAVE, 2 * WAVE))
    # the two ranges meet: one ends where the other starts, in each partition
    assert [(p, end) for p, _, end in early_ranges] == [(p, start) for p, start, _ in late_ranges]


def test_from_offset_starts_every_partition_there_and_scram_logs_in(secured, tmp_path, capsys):
    import pyarrow.parquet as pq

    cluster, root, _ = secured
    out = tmp_path / "out"
    scram = _properties(root, "scrammer", SCRAM_SECRET, "SCRAM-SHA-256")
    assert _in_process(capsys, cluster, out, scram, "--topics", "secured", "--from-offset", "10") == 0
    _, ranges = _keys_and_ranges(out)
    assert [start for _, start, _ in ranges] == [10, 10]
    batches = pq.read_table(str(table_dir(out, "batches")), columns=["partition", "base_offset", "last_offset"]).to_pylist()
    for p in (0, 1):  # the batch holding offset 10 first, whole, then the rest of the partition
        mine = sorted((b["base_offset"], b["last_offset"]) for b in batches if b["partition"] == p)
        assert mine[0][0] <= 10 <= mine[0][1] and mine[-1][1] == WAVE - 1
        assert all(a[1] + 1 == b[0] for a, b in zip(mine, mine[1:]))


def test_a_batch_corrupt_on_the_brokers_disk_comes_over_the_protocol_as_a_crc_failure(secured, tmp_path, capsys):
    import pyarrow.parquet as pq

    cluster, root, _ = secured
    out = tmp_path / "out"
    assert _in_process(capsys, cluster, out, _properties(root, "admin", "admin-secret"), "--topics", "corrupted") == 0
    batches = sorted(pq.read_table(str(table_dir(out, "batches")), columns=["base_offset", "crc_valid", "batch_size"]).to_pylist(),
                     key=lambda b: b["base_offset"])
    assert [(b["base_offset"], b["crc_valid"]) for b in batches] == [(0, False), (1, True), (2, True)]
    [error] = pq.read_table(str(table_dir(out, "parse_errors"))).to_pylist()
    assert (error["error_kind"], error["file_position"], error["bytes_affected"]) == ("crc_mismatch", 0,
                                                                                      batches[0]["batch_size"])
    [segment] = pq.read_table(str(table_dir(out, "segments"))).to_pylist()
    assert segment["valid_bytes"] + error["bytes_affected"] == segment["size_bytes"]
    assert sorted(int(k) for k in pq.read_table(str(table_dir(out, "records")), columns=["key"]).column("key").to_pylist()) == [1, 2]



def test_a_topic_pattern_that_matches_no_topic_is_one_line_and_exit_2(secured, tmp_path):
    cluster, root, _ = secured
    done = _export(cluster, tmp_path / "out", _properties(root, "audit", SECRET), "--topics", "no-such-topic")
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert f"no topic of kafka://{cluster.bootstrap} that the principal may describe matches --topics " \
           "'no-such-topic'" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
def test_tls_to_a_listener_without_it_is_one_line_and_exit_2(secured, tmp_path, protocol):
    cluster, root, _ = secured
    properties = _properties(root, "audit", SECRET, more=f"security.protocol={protocol}\ndefault.api.timeout.ms=3000\n")
    done = _export(cluster, tmp_path / "out", properties)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert done.stderr.startswith(f"segaudit: cannot use kafka://{cluster.bootstrap}: no TLS handshake ("), done.stderr
    assert f"does this listener speak TLS? security.protocol is {protocol} in --client-config" in done.stderr
