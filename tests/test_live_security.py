"""A live cluster behind SASL and ACLs, exported over the protocol with a client properties file:
the credentials work, and never show up in what segaudit prints or writes; a refused login and a
principal the ACLs do not allow are each one line and exit 2.

One broker (the newest 4.x release) whose client listener speaks SASL_PLAINTEXT with PLAIN, and
Kafka's StandardAuthorizer: ``admin`` is a super user, ``audit`` may describe the cluster and
describe and read the topic ``secured``, ``outsider`` may do nothing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.kafka_cluster import VERSIONS, KafkaCluster, require_jars

pytestmark = [pytest.mark.broker, pytest.mark.spark]
SECRET = "au-d1t-s3cret"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="{user}" password="{password}";')
ADMIN = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": "admin",
         "sasl_plain_password": "admin-secret"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    from kafka import KafkaProducer
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType

    version = VERSIONS[0]
    require_jars(version)
    root = tmp_path_factory.mktemp("secured")
    users = f'user_admin="admin-secret" user_audit="{SECRET}" user_outsider="outsider-secret"'
    config = {
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
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
            admin.create_acls([ACL(f"User:{user}", "*", op, ACLPermissionType.ALLOW, ResourcePattern(kind, name))
                               for user, kind, name, op in allow])
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, enable_idempotence=True, acks="all", **ADMIN)
        for i in range(50):
            producer.send("secured", key=str(i).encode(), value=b"secret-data", partition=i % 2)
            producer.send("elsewhere", key=str(i).encode(), value=b"x")
        producer.close()
        yield cluster, root
    finally:
        cluster.close()


def _properties(root: Path, user: str, password: str) -> Path:
    path = root / f"{user}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    f"sasl.jaas.config={JAAS.format(user=user, password=password)}\n")
    return path


def _export(cluster: KafkaCluster, out: Path, properties: Path, *more: str, command: str = "export"
            ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analytics", command, f"kafka://{cluster.bootstrap}", "--out", str(out),
                           "--client-config", str(properties), "--records", "--master", "local[2]", *more],
                          capture_output=True, text=True, cwd=REPO, timeout=600)


def test_an_audit_principal_audits_what_the_acls_allow_and_its_secret_is_nowhere(secured, tmp_path):
    """``segaudit run kafka://...``: the whole job over the protocol; the password is in no output,
    table, manifest, summary, Data Docs page or report under OUT."""
    cluster, root = secured
    out = tmp_path / "out"
    done = _export(cluster, out, _properties(root, "audit", SECRET), "--no-history", command="run")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "report" / "index.html").is_file() and (out / "summary.json").is_file()
    import pyarrow.parquet as pq

    keys = pq.read_table(out / "records", columns=["topic", "key"]).to_pylist()
    assert {r["topic"] for r in keys} == {"secured"}  # the topic it may not describe is not even listed
    assert sorted(int(r["key"]) for r in keys) == list(range(50))
    assert SECRET not in done.stdout + done.stderr
    for path in out.rglob("*"):  # the manifest, every table's Parquet files, everything under OUT
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_a_refused_login_is_one_line_and_exit_2(secured, tmp_path):
    cluster, root = secured
    done = _export(cluster, tmp_path / "out", _properties(root, "audit", "wrong"))
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert f"cannot use kafka://{cluster.bootstrap}: login refused" in done.stderr and "wrong" not in done.stderr


def test_a_principal_the_acls_do_not_allow_is_one_line_and_exit_2(secured, tmp_path):
    cluster, root = secured
    done = _export(cluster, tmp_path / "out", _properties(root, "outsider", "outsider-secret"), "--topics", "secured")
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert "outsider-secret" not in done.stderr
    assert "access denied" in done.stderr or "may describe" in done.stderr
