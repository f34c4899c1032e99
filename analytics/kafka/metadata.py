"""The KRaft metadata log, ``__cluster_metadata-0``: the topic and broker configs in force at its end.

Each record value of the metadata log (its ``.log`` segments, and its snapshots
``<end offset>-<epoch>.checkpoint``, the same record-batch format, holding the whole state below
their end offset) is framed as: unsigned varint frame version (1), unsigned varint api key (the
record type), unsigned varint record version, then the record in Kafka's generated-message
encoding; every type read here is flexible from version 0: compact strings (unsigned varint
length + 1, 0 for null), a tagged-field section at the end. The types read
(``metadata/src/main/resources/common/metadata/*.json`` in Kafka's sources):

- ``TopicRecord`` (2): ``Name`` string, ``TopicId`` uuid (16 bytes; read in ``partition.metadata``'s
  form, url-safe base64, as every table shows a topic id);
- ``ConfigRecord`` (4): ``ResourceType`` int8 (2 topic, 4 broker; resource name "" for the
  cluster-wide broker default), ``ResourceName``, ``Name``, ``Value`` nullable (null: the setting
  is deleted);
- ``RemoveTopicRecord`` (9): ``TopicId``: the topic and its configs are gone;
- ``BeginTransactionRecord``/``EndTransactionRecord``/``AbortTransactionRecord`` (23/24/25): the
  records between a begin and an abort are not applied.

Control batches (snapshot header and footer, leader changes, KRaft voters) are skipped. Other
record types are not needed; a version or type Kafka did not have when this was written is
skipped and counted, a record that does not decode is a ``record_decode`` parse error: neither
stops the reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from analytics.kafka.errors import RECORD_DECODE, KafkaFormatError
from analytics.kafka.fields import Fields
from analytics.kafka.model import ParseError
from analytics.kafka.sidecars.metadata import topic_id_text

METADATA_TOPIC = "__cluster_metadata"
SNAPSHOT_FILE = re.compile(r"^(?P<offset>\d{20})-(?P<epoch>\d{10})\.checkpoint$")
FRAME_VERSION = 1
TOPIC_RECORD, CONFIG_RECORD, REMOVE_TOPIC_RECORD = 2, 4, 9
BEGIN_TXN, END_TXN, ABORT_TXN = 23, 24, 25
KNOWN_TYPES = frozenset(range(30)) - {6, 13, 16}  # RegisterBrokerRecord (0) to UnregisterControllerRecord (29)
VERSIONS = {TOPIC_RECORD: 0, CONFIG_RECORD: 0, REMOVE_TOPIC_RECORD: 0, BEGIN_TXN: 0, END_TXN: 0, ABORT_TXN: 0}
RESOURCE_TYPES = {2: "topic", 4: "broker"}  # ConfigResource.Type ids; others (client metrics, groups) kept by number
TOPIC, BROKER = "topic", "broker"


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """A decoded record: its type (api key), version and fields by their names in Kafka's schema
    (empty for a type not read here)."""

    api_key: int
    version: int
    fields: dict


def decode_record(value: bytes | None) -> MetadataRecord:
    """A metadata record value; KafkaFormatError when it does not decode. A type or version not read
    here has no fields (:func:`is_known` says whether Kafka had it)."""
    if value is None:
        raise KafkaFormatError(RECORD_DECODE, "a metadata record without a value")
    r = Fields(value, "metadata record")
    frame = r.uvarint()
    if frame != FRAME_VERSION:
        raise KafkaFormatError(RECORD_DECODE, f"metadata record frame version {frame}: Kafka writes {FRAME_VERSION}")
    api_key, version = r.uvarint(), r.uvarint()
    if VERSIONS.get(api_key) != version:
        return MetadataRecord(api_key, version, {})
    if api_key == CONFIG_RECORD:
        fields = {"ResourceType": r.int8(), "ResourceName": r.string(), "Name": r.string(),
                  "Value": r.string(nullable=True)}
    elif api_key == TOPIC_RECORD:
        fields = {"Name": r.string(), "TopicId": topic_id_text(r.uuid())}
    elif api_key == REMOVE_TOPIC_RECORD:
        fields = {"TopicId": topic_id_text(r.uuid())}
    else:  # the transaction records: their fields are not needed
        fields = {}
        r.take(len(value) - r.pos)
        return MetadataRecord(api_key, version, fields)
    r.tags()  # none of them needed
    r.done()
    return MetadataRecord(api_key, version, fields)


def is_known(record: MetadataRecord) -> bool:
    """Whether Kafka (4.1) writes this type at this version: a record read here, or one not needed."""
    wanted = VERSIONS.get(record.api_key)
    return record.api_key in KNOWN_TYPES and (wanted is None or wanted == record.version)


@dataclass
class ClusterConfigs:
    """The configs of a metadata log as its records are applied in offset order: the value in force
    of each (resource type, resource name, config name), with the offset and file that set it."""

    configs: dict = field(default_factory=dict)  # (resource type, name, config) -> (value, offset, file)
    topics: dict = field(default_factory=dict)  # topic id -> name
    removed: dict = field(default_factory=dict)  # topic id -> (name, offset, timestamp) of its RemoveTopicRecord
    records: int = 0  # records applied
    skipped: int = 0  # records of a type or version Kafka did not have when this was written
    end_offset: int = -1  # the offset after the last record applied
    _pending: list | None = None  # the records of an open metadata transaction

    def apply(self, record: MetadataRecord, offset: int, file: str, timestamp: int | None = None) -> None:
        self.end_offset = max(self.end_offset, offset + 1)
        if not is_known(record):
            self.skipped += 1
            return
        self.records += 1
        if record.api_key == BEGIN_TXN:
            self._pending = []
        elif record.api_key == END_TXN:
            for pending in self._pending or ():
                self._change(*pending)
            self._pending = None
        elif record.api_key == ABORT_TXN:
            self._pending = None
        elif self._pending is not None:
            self._pending.append((record, offset, file, timestamp))
        else:
            self._change(record, offset, file, timestamp)

    def _change(self, record: MetadataRecord, offset: int, file: str, timestamp: int | None = None) -> None:
        f = record.fields
        if record.api_key == TOPIC_RECORD:
            self.topics[f["TopicId"]] = f["Name"]
        elif record.api_key == REMOVE_TOPIC_RECORD:
            name = self.topics.pop(f["TopicId"], None)
            self.removed[f["TopicId"]] = (name, offset, timestamp)
            if name is not None:
                for key in [k for k in self.configs if k[0] == TOPIC and k[1] == name]:
                    del self.configs[key]
        elif record.api_key == CONFIG_RECORD:
            key = (RESOURCE_TYPES.get(f["ResourceType"], str(f["ResourceType"])), f["ResourceName"], f["Name"])
            if f["Value"] is None:
                self.configs.pop(key, None)
            else:
                self.configs[key] = (f["Value"], offset, file)

    def topic_ids(self) -> dict:
        """The topic ids this metadata log knows: ``live`` (id -> name, the topics at its end) and
        ``removed`` (id -> its name, the offset of its ``RemoveTopicRecord`` and the record's
        timestamp, when the controller removed it; a removal older than the snapshot read is not
        among them: the snapshot holds the live topics alone)."""
        return {"live": dict(sorted(self.topics.items())),
                "removed": {topic_id: {"name": name, "offset": offset, "timestamp": timestamp}
                            for topic_id, (name, offset, timestamp) in sorted(self.removed.items())}}

    def rows(self, log_dir: str, node_id: int | None) -> list[dict]:
        """The configs in force as rows of ``cluster_configs``."""
        return [{"resource_type": rtype, "resource_name": rname, "name": name, "value": value, "offset": offset,
                 "log_dir": log_dir, "node_id": node_id, "end_offset": self.end_offset, "file": file}
                for (rtype, rname, name), (value, offset, file) in sorted(self.configs.items())]


def apply_records(state: ClusterConfigs, records, file: str, *, topic: str = METADATA_TOPIC,
                  partition: int = 0, since: int = 0) -> list[ParseError]:
    """Apply the non-control records of a metadata file at or above offset ``since`` (``records``: the
    reader's record rows, a pyarrow table or batch with ``offset``, ``value``, ``is_control`` and
    perhaps ``timestamp``); the
    parse errors of the records that do not decode (no bytes lost: their batches were read)."""
    errors = []
    times = records.column("timestamp").to_pylist() if "timestamp" in records.column_names else [None] * len(records)
    columns = (records.column(c).to_pylist() for c in ("offset", "value", "is_control"))
    for (offset, value, control), timestamp in zip(zip(*columns), times):
        if control or offset < since:
            continue
        try:
            record = decode_record(value)
        except KafkaFormatError as exc:
            errors.append(ParseError(topic, partition, file, -1, exc.kind, f"offset {offset}: {exc}", 0))
            continue
        state.apply(record, offset, file, timestamp)
    return errors


def snapshot_offset(name: str) -> int | None:
    """The end offset of a KRaft snapshot file name, or None for another file."""
    m = SNAPSHOT_FILE.match(name)
    return int(m["offset"]) if m else None


def node_id_of(meta_properties: str) -> int | None:
    """``node.id`` (KRaft) or ``broker.id`` (ZooKeeper) of a log dir's ``meta.properties`` text."""
    values = dict(line.split("=", 1) for line in meta_properties.splitlines()
                  if "=" in line and not line.lstrip().startswith(("#", "!")))
    for key in ("node.id", "broker.id"):
        try:
            return int(values[key].strip())
        except (KeyError, ValueError):
            continue
    return None
