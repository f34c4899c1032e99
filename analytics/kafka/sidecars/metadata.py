"""A partition's ``partition.metadata``: its topic id, read and written.

Upstream sources, under https://github.com/apache/kafka/blob/trunk/:
- storage/src/main/java/org/apache/kafka/storage/internals/checkpoint/PartitionMetadataFile.java
  (with PartitionMetadataReadBuffer.java and PartitionMetadata.java beside it)
"""

from __future__ import annotations

import base64
import re
import uuid

from analytics.kafka.errors import KafkaFormatError
from analytics.kafka.model import PartitionMetadata, SidecarResult
from analytics.kafka.sidecars.results import corrupt, error_row
from analytics.kafka.sidecars.text import TOKEN, as_bytes, checked, java_integer, lines, quote

PARTITION_METADATA = "partition.metadata"
PARTITION_METADATA_VERSION = 0
# Uuid.ZERO_UUID.toString(): Kafka's "no topic id" sentinel, which PartitionMetadataReadBuffer refuses.
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def topic_id_uuid(text: str) -> uuid.UUID:
    """``partition.metadata``'s form of a topic id (:func:`topic_id_text`) as the UUID the protocol carries.

    >>> topic_id_uuid("ECE8pXTPS4K8OWe9Uc0cUQ")
    UUID('10213ca5-74cf-4b82-bc39-67bd51cd1c51')
    """
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def topic_id_text(topic_id: uuid.UUID | str | None) -> str | None:
    """A topic id the Metadata API gives (a UUID, as kafka-python parses it) as ``partition.metadata``
    writes it (``Uuid.toString``: url-safe base64 of its 16 bytes, no padding); None for none or the
    zero Uuid (a broker before 2.8, or Metadata below v10, names no topic id).

    >>> topic_id_text(uuid.UUID("10213ca5-74cf-4b82-bc39-67bd51cd1c51"))
    'ECE8pXTPS4K8OWe9Uc0cUQ'
    >>> topic_id_text(uuid.UUID(int=0)) is None and topic_id_text(None) is None
    True
    """
    if topic_id is None:
        return None
    text = base64.urlsafe_b64encode(uuid.UUID(str(topic_id)).bytes).decode().rstrip("=")
    return None if text == ZERO_TOPIC_ID else text


def read_partition_metadata(data: bytes | str, *, topic: str, partition: int, file: str) -> SidecarResult:
    """The topic id of a ``partition.metadata`` file, as one :class:`PartitionMetadata` row.

    The topic id is kept as written (Kafka's base64-url ``Uuid.toString``); any token is taken
    except the zero Uuid, which the broker refuses. Like PartitionMetadataReadBuffer, any version
    from 0 up is accepted (for downgrades) and lines after the topic id are ignored. An empty
    file gives no row and no error: brokers 2.8 to 3.0 created it empty before the topic id was
    known and skipped it while empty.

    >>> data = b"version: 0\\ntopic_id: ECE8pXTPS4K8OWe9Uc0cUQ"
    >>> read_partition_metadata(data, topic="t", partition=0, file="f").rows
    [PartitionMetadata(topic='t', partition=0, version=0, topic_id='ECE8pXTPS4K8OWe9Uc0cUQ', file='f')]
    """
    try:
        parsed = _decode_partition_metadata(as_bytes(data))
    except KafkaFormatError as exc:
        return SidecarResult(errors=[error_row(topic, partition, file, exc)])
    return SidecarResult(rows=[] if parsed is None else [PartitionMetadata(topic, partition, *parsed, file=file)])


def _decode_partition_metadata(data: bytes) -> tuple[int, str] | None:
    size = len(data)
    found = lines(data)
    if not found:
        return None
    version_text = _metadata_value(found[0], "version", size)
    version = java_integer(version_text, 32)
    if version is None:
        raise corrupt(f"malformed version line: {quote(found[0][1])}", found[0][0], size)
    if version < PARTITION_METADATA_VERSION:
        raise corrupt(f"unknown partition.metadata version {version}", found[0][0], size)
    if len(found) < 2:
        raise corrupt("the topic_id line is missing", size, size)
    topic_id = _metadata_value(found[1], "topic_id", size)
    if not TOKEN.fullmatch(topic_id):
        raise corrupt(f"malformed topic_id line: {quote(found[1][1])}", found[1][0], size)
    if topic_id == ZERO_TOPIC_ID:
        raise corrupt("the topic id is the zero Uuid, which Kafka rejects", found[1][0], size)
    return version, topic_id


def _metadata_value(line: tuple[int, str], key: str, size: int) -> str:
    # PartitionMetadataReadBuffer splits at the first ":\s+" and wants the exact key before it.
    position, text = line
    match = re.fullmatch(re.escape(key) + r":[ \t\n\x0b\f\r]+(.*)", text, re.DOTALL)
    if match is None:
        raise corrupt(f"malformed {key} line: {quote(text)}", position, size)
    return match.group(1)


def write_partition_metadata(topic_id: str, *, version: int = PARTITION_METADATA_VERSION) -> bytes:
    """A ``partition.metadata`` file. As PartitionMetadata.encode, the last line has no newline.

    >>> write_partition_metadata("ECE8pXTPS4K8OWe9Uc0cUQ")
    b'version: 0\\ntopic_id: ECE8pXTPS4K8OWe9Uc0cUQ'
    """
    if not TOKEN.fullmatch(topic_id):
        raise ValueError(f"topic id {topic_id!r} is empty or holds whitespace, so it would not read back")
    return f"version: {checked(version, 32, 'version')}\ntopic_id: {topic_id}".encode()
