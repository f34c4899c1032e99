"""The on-disk byte layout of Kafka log entries, written down once, as data.

Every integer on disk is big-endian (Java ``ByteBuffer`` default).

Upstream sources (apache/kafka):
- clients/src/main/java/org/apache/kafka/common/record/DefaultRecordBatch.java (v2 batch header)
- clients/src/main/java/org/apache/kafka/common/record/LegacyRecord.java (magic 0/1 messages)
- clients/src/main/java/org/apache/kafka/common/record/Records.java (entry framing)
- clients/src/main/java/org/apache/kafka/common/record/ControlRecordType.java
- clients/src/main/java/org/apache/kafka/common/record/EndTransactionMarker.java
"""

from __future__ import annotations

import struct

# Sequence numbers are int32 values in [0, INT_MAX] that wrap to 0: a contract name, re-exported
# here beside the sentinels the layout's readers use with it.
from analytics.contract.vocabulary import INT_MAX  # noqa: F401

# --- Entry framing (all magics): offset:int64 | size:int32, size counts the bytes that follow.
FRAME = struct.Struct(
    ">q"  # offset: base offset (v2) or the message offset (legacy; last inner offset of a wrapper)
    "i"  # size: bytes after this field
)
LOG_OVERHEAD = FRAME.size  # 12
MAGIC_OFFSET = LOG_OVERHEAD + 4  # the magic byte sits at entry offset 16 for every magic
# The smallest prefix that tells framing and magic apart: offset, size, 4 bytes (PLE or CRC), magic.
FRAME_AND_MAGIC = MAGIC_OFFSET + 1

# --- RecordBatch v2 header (magic 2), 61 bytes.
BATCH_HEADER = struct.Struct(
    ">q"  # 0  baseOffset
    "i"  # 8  batchLength: batch size - 12
    "i"  # 12 partitionLeaderEpoch (not covered by the CRC)
    "b"  # 16 magic
    "I"  # 17 crc: CRC-32C of bytes [21, end of batch)
    "h"  # 21 attributes (only the low byte is used)
    "i"  # 23 lastOffsetDelta
    "q"  # 27 baseTimestamp (deleteHorizonMs when DELETE_HORIZON_MASK is set)
    "q"  # 35 maxTimestamp
    "q"  # 43 producerId
    "h"  # 51 producerEpoch
    "i"  # 53 baseSequence
    "i"  # 57 recordsCount
)
RECORD_BATCH_OVERHEAD = BATCH_HEADER.size  # 61
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers [ATTRIBUTES_OFFSET, end)
# The same header laid out as a NumPy record, for decoding many headers at once.
BATCH_HEADER_NUMPY_FIELDS = (
    ("base_offset", ">i8"),
    ("length", ">i4"),
    ("partition_leader_epoch", ">i4"),
    ("magic", "i1"),
    ("crc", ">u4"),
    ("attributes", ">i2"),
    ("last_offset_delta", ">i4"),
    ("base_timestamp", ">i8"),
    ("max_timestamp", ">i8"),
    ("producer_id", ">i8"),
    ("producer_epoch", ">i2"),
    ("base_sequence", ">i4"),
    ("record_count", ">i4"),
)
# Smallest legal value of the size field for a v2 batch.
MIN_V2_SIZE_FIELD = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # 49

# Attributes (low byte of the int16).
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # 0 CreateTime, 1 LogAppendTime
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40  # 3.1+ (KIP-534): baseTimestamp holds deleteHorizonMs

# Sentinels (RecordBatch.java).
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

MAGIC_V0 = 0
MAGIC_V1 = 1
MAGIC_V2 = 2

# Codec ids (CompressionType.java).
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {name: i for i, name in enumerate(CODEC_NAMES)}


def codec_name(codec_id: int) -> str:
    """Name of a compression codec id; ids Kafka never assigned read as ``unknown(N)``."""
    return CODEC_NAMES[codec_id] if 0 <= codec_id < len(CODEC_NAMES) else f"unknown({codec_id})"


TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
NO_TIMESTAMP_TYPE = "NoTimestampType"  # magic 0 has no timestamps

# --- Legacy messages (magic 0/1): offset | size | crc:uint32 | magic | attributes | [timestamp v1] | key | value.
LEGACY_HEADER_V0 = struct.Struct(
    ">q"  # offset (absolute; for a v1 wrapper, the offset of the last inner message)
    "i"  # size
    "I"  # crc: CRC-32 (IEEE) of [magic, end)
    "b"  # magic
    "b"  # attributes: bits 0-2 codec, bit 3 timestamp type (v1 only)
)
LEGACY_HEADER_V1 = struct.Struct(">qiIbbq")  # as v0, then timestamp:int64
LEGACY_CRC_START = LOG_OVERHEAD + 4  # CRC-32 covers [magic, end)
LEGACY_LENGTH = struct.Struct(">i")  # keyLength / valueLength, -1 = null
# Smallest size-field values: crc4 magic1 attributes1 [timestamp8] keyLength4 valueLength4.
MIN_LEGACY_SIZE_FIELD = {MAGIC_V0: 14, MAGIC_V1: 22}

# --- Control records (key: version:int16 type:int16; value of COMMIT/ABORT: version:int16 coordinatorEpoch:int32).
CONTROL_KEY = struct.Struct(">hh")
END_TXN_MARKER_VALUE = struct.Struct(">hi")
CONTROL_TYPE_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
CONTROL_TYPE_IDS = {name: i for i, name in CONTROL_TYPE_NAMES.items()}
END_TXN_MARKER_TYPES = frozenset({"ABORT", "COMMIT"})


def control_type_name(type_id: int) -> str:
    """Name of a control record type (ControlRecordType.fromTypeId): unknown ids read as UNKNOWN."""
    return CONTROL_TYPE_NAMES.get(type_id, "UNKNOWN")
