"""The real-broker fixture itself: three KRaft nodes form one cluster and replicate a partition."""

from __future__ import annotations

import pytest

from tests.kafka_cluster import VERSIONS, KafkaCluster, require_jars

pytestmark = pytest.mark.broker


def test_three_brokers_form_one_cluster_and_replicate(tmp_path):
    from kafka import KafkaProducer

    version = VERSIONS[0]
    require_jars(version)
    with KafkaCluster(version, tmp_path, nodes=3, config={"min.insync.replicas": "2"}) as cluster:
        admin = cluster.admin()
        try:
            assert len(admin.describe_cluster()["brokers"]) == 3
        finally:
            admin.close()
        cluster.create_topic("replicated", replication=3)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True)
        for i in range(10):
            producer.send("replicated", f"v{i}".encode()).get(timeout=30)
        producer.close()
    # every node's log dir holds the partition with the same bytes
    segments = [(n.log_dir / "replicated-0" / "00000000000000000000.log").read_bytes() for n in cluster.members]
    assert len(segments[0]) > 0 and segments[0] == segments[1] == segments[2]
