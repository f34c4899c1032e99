"""The treatment of internal and framework topics (``contract.TOPIC_KINDS``, docs/internal-topics.md):
which checks apply to which topic, the same in Python (``topic_kind``) and in Spark
(``audit.predicates.checked``), and the documentation's table equal to the data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analytics.contract import TOPIC_CHECKS, TOPIC_KINDS, USER_TOPIC, topic_kind, topics_exempt

DOC = Path(__file__).resolve().parent.parent / "docs" / "internal-topics.md"

# topic -> its kind: every name a healthy cluster writes, and names that only look like them
NAMES = {
    "__cluster_metadata": "cluster_metadata",
    "__consumer_offsets": "consumer_offsets",
    "__transaction_state": "transaction_state",
    "__share_group_state": "share_group_state",
    "__remote_log_metadata": "remote_log_metadata",
    "wordcount-counts-store-changelog": "streams_changelog",
    "wordcount-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition": "streams_repartition",
    "connect-configs": "connect_internal",
    "connect-offsets": "connect_internal",
    "connect-status": "connect_internal",
    "connect-cluster-configs": "connect_internal",
    "docker-connect-offsets": "connect_internal",
    "mm2-status.eu-west.internal": "connect_internal",
    "orders": "user",
    "payments-status": "user",  # a -status suffix alone is not Connect's
    "reconnect-status": "user",
    "changelog": "user",  # the suffix needs a name before it
    "-repartition": "user",
    "__consumer_offsets2": "user",
    "mm2-configs.internal": "user",
}


@pytest.mark.parametrize("topic", sorted(NAMES))
def test_each_topic_gets_its_kind(topic):
    assert topic_kind(topic).kind == NAMES[topic]


def test_the_coordinators_and_the_controller_are_not_replayed_nor_counted_as_duplicates():
    for name in ("__cluster_metadata", "__consumer_offsets", "__transaction_state", "__share_group_state"):
        k = topic_kind(name)
        assert not k.replay and not k.record_duplicates, name
    # clients' topics are replayed, whoever the client
    for name in ("__remote_log_metadata", "app-store-changelog", "app-x-repartition", "connect-offsets", "orders"):
        assert topic_kind(name).replay, name
    # transactional offset commits are closed by markers in __consumer_offsets, and snapshotted
    assert topic_kind("__consumer_offsets").transactions and topic_kind("__consumer_offsets").snapshots
    # a repartition topic's records are the application's data
    assert topic_kind("app-x-repartition").record_duplicates and USER_TOPIC.record_duplicates


def test_every_kind_is_named_once_and_explained():
    kinds = [k.kind for k in TOPIC_KINDS]
    assert len(kinds) == len(set(kinds)) and USER_TOPIC.kind not in kinds
    for k in TOPIC_KINDS:
        assert k.why and k.written_by and (k.names or k.pattern), k.kind
        assert all(topic_kind(n) is k for n in k.names), k.kind
    with pytest.raises(ValueError, match="unknown check"):
        USER_TOPIC.applies("no_such_check")


@pytest.mark.parametrize("check", TOPIC_CHECKS)
def test_the_exempt_topics_are_those_the_check_does_not_apply_to(check):
    names, pattern = topics_exempt(check)
    for topic in NAMES:
        exempt = topic in names or (pattern is not None and re.fullmatch(pattern, topic) is not None)
        assert exempt == (not topic_kind(topic).applies(check)), (check, topic)


def test_the_documentation_holds_the_table():
    """docs/internal-topics.md has a row per kind whose cells say the same as the data."""
    text = DOC.read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]  # not a cell's \|
        if line.startswith("| `") and len(cells) >= 6:
            rows[cells[0]] = cells
    for k in (*TOPIC_KINDS, USER_TOPIC):
        cells = rows[f"`{k.kind}`"]
        marks = ["yes" if k.applies(c) else "no" for c in TOPIC_CHECKS]
        assert [c.split()[0] for c in cells[2:6]] == marks, k.kind
    readme = (DOC.parent.parent / "README.md").read_text()
    assert "docs/internal-topics.md" in readme


@pytest.mark.spark
def test_the_spark_predicate_agrees_with_topic_kind(spark):
    from pyspark.sql import functions as F

    from analytics.audit import predicates

    frame = spark.createDataFrame([(t,) for t in NAMES], "topic string")
    got = frame.select("topic", *[predicates.checked(c).alias(c) for c in TOPIC_CHECKS]).collect()
    for row in got:
        assert [row[c] for c in TOPIC_CHECKS] == [topic_kind(row["topic"]).applies(c) for c in TOPIC_CHECKS], row
    replayed = frame.where(predicates.checked("replay") & F.col("topic").startswith("__")).collect()
    assert sorted(r["topic"] for r in replayed) == ["__consumer_offsets2", "__remote_log_metadata"]
