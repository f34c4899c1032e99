"""The ``batches`` columns of a window's entries: headers decoded at once with NumPy, then
labelled into an Arrow record batch.

Headers are gathered with one NumPy fancy index per 16k entries and CRCs computed in one list
pass; the derived columns (last offset, last sequence mod 2^31, attribute flags) are computed on
whole arrays. Compression codecs and timestamp types stay small integer codes until the Arrow
batch is built.
"""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
from crc32c import crc32c as _crc32c  # the C function itself: called once per batch

from analytics.contract import schemas as schema
from analytics.contract.vocabulary import INT_MAX, SEQ_SPACE
from analytics.kafka import layout as L

_HEADER_DTYPE = np.dtype(list(L.BATCH_HEADER_NUMPY_FIELDS))
assert _HEADER_DTYPE.itemsize == L.RECORD_BATCH_OVERHEAD
_GATHER_ROWS = 16384  # headers gathered per NumPy fancy-index step (bounds its index array to 8 MB)
# The first 26 bytes of a legacy entry (the smallest entry, v0, has 26): for v0 the "timestamp"
# bytes belong to the key length and are ignored.
_LEGACY_HEADER_DTYPE = np.dtype(
    [
        ("offset", ">i8"),
        ("size", ">i4"),
        ("crc", ">u4"),
        ("magic", "i1"),
        ("attributes", "i1"),
        ("timestamp", ">i8"),
    ]
)

# Timestamp types as small codes in the columns, labelled when the Arrow batch is built.
LOG_APPEND_TIME = 1
_NO_TIMESTAMP_TYPE = 2
_TIMESTAMP_TYPE_ARROW = pa.array([*L.TIMESTAMP_TYPES, L.NO_TIMESTAMP_TYPE], pa.string())
_CODEC_ARROW = pa.array([L.codec_name(i) for i in range(8)], pa.string())
# Columns that are the same for every legacy entry.
_LEGACY_CONSTANT = {
    "partition_leader_epoch": L.NO_PARTITION_LEADER_EPOCH,
    "is_transactional": False,
    "is_control": False,
    "producer_id": L.NO_PRODUCER_ID,
    "producer_epoch": L.NO_PRODUCER_EPOCH,
    "base_sequence": L.NO_SEQUENCE,
    "last_sequence": L.NO_SEQUENCE,
    "coordinator_epoch": 0,
    "has_coordinator_epoch": False,
    "has_delete_horizon": False,
}


def v2_columns(buf: bytes, positions: list[int]) -> dict[str, np.ndarray]:
    """Decode and CRC-check the headers of the v2 batches at ``positions`` at once."""
    headers = _gather(buf, positions, _HEADER_DTYPE)
    size = headers["length"].astype(np.int64) + L.LOG_OVERHEAD
    mv = memoryview(buf)
    crc_skip = L.ATTRIBUTES_OFFSET
    computed = [_crc32c(mv[p + crc_skip : p + n]) for p, n in zip(positions, size.tolist())]
    base_offset = headers["base_offset"].astype(np.int64)
    delta = headers["last_offset_delta"].astype(np.int64)
    base_sequence = headers["base_sequence"].astype(np.int32)
    # lastSequence = incrementSequence(baseSequence, lastOffsetDelta), i.e. addition mod 2^31.
    seq_sum = base_sequence.astype(np.int64) + delta
    seq_sum = np.where(seq_sum > INT_MAX, seq_sum - SEQ_SPACE, seq_sum)
    last_sequence = np.where(base_sequence == L.NO_SEQUENCE, L.NO_SEQUENCE, seq_sum).astype(np.int32)
    attributes = headers["attributes"].astype(np.int16)
    low = attributes & 0xFF  # only the low byte carries meaning
    base_timestamp = headers["base_timestamp"].astype(np.int64)
    return {
        "batch_size": size.astype(np.int32),
        "magic": headers["magic"].astype(np.int8),
        "crc_valid": np.asarray(computed, dtype=np.uint32) == headers["crc"],
        "crc": headers["crc"].astype(np.int64),
        "base_offset": base_offset,
        "last_offset": base_offset + delta,
        "record_count": headers["record_count"].astype(np.int32),
        "partition_leader_epoch": headers["partition_leader_epoch"].astype(np.int32),
        "codec": (low & L.COMPRESSION_MASK).astype(np.int8),
        # A code into _TIMESTAMP_TYPE_ARROW.
        "timestamp_type": ((low & L.TIMESTAMP_TYPE_MASK) != 0).astype(np.int8),
        "is_transactional": (low & L.TRANSACTIONAL_MASK) != 0,
        "is_control": (low & L.CONTROL_MASK) != 0,
        "base_timestamp": base_timestamp,
        "max_timestamp": headers["max_timestamp"].astype(np.int64),
        "producer_id": headers["producer_id"].astype(np.int64),
        "producer_epoch": headers["producer_epoch"].astype(np.int16),
        "base_sequence": base_sequence,
        "last_sequence": last_sequence,
        "attributes": attributes,
        "has_delete_horizon": (low & L.DELETE_HORIZON_MASK) != 0,
    }


def legacy_columns(buf: bytes, positions: list[int]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Columns (same names and codes as the v2 ones) for the legacy entries at ``positions``, and
    each entry's size in bytes as int64.

    Headers and CRC-32s are read for all entries at once. A compressed wrapper's first offset and
    record count are inside it: until it is opened its columns say its last offset and one record.
    """
    n = len(positions)
    heads = _gather(buf, positions, _LEGACY_HEADER_DTYPE)
    size = heads["size"].astype(np.int64) + L.LOG_OVERHEAD
    mv = memoryview(buf)
    computed = [zlib.crc32(mv[p + L.LEGACY_CRC_START : p + k]) for p, k in zip(positions, size.tolist())]
    crc_valid = np.asarray(computed, dtype=np.uint32) == heads["crc"]
    magic = heads["magic"].astype(np.int8)
    attributes = heads["attributes"].astype(np.int16) & 0xFF
    codec = (attributes & L.COMPRESSION_MASK).astype(np.int8)
    timestamp = np.where(magic == L.MAGIC_V1, heads["timestamp"], L.NO_TIMESTAMP).astype(np.int64)
    offset = heads["offset"].astype(np.int64)
    cols = {
        "batch_size": size.astype(np.int32),
        "magic": magic,
        "crc_valid": crc_valid,
        "crc": heads["crc"].astype(np.int64),
        "base_offset": offset.copy(),
        "last_offset": offset,
        "record_count": np.ones(n, dtype=np.int32),
        "codec": codec,
        "timestamp_type": np.where(
            magic == L.MAGIC_V0, _NO_TIMESTAMP_TYPE, (attributes & L.TIMESTAMP_TYPE_MASK) != 0
        ).astype(np.int8),
        "base_timestamp": timestamp.copy(),
        "max_timestamp": timestamp,
        "attributes": attributes,
    }
    cols.update({k: np.full(n, value) for k, value in _LEGACY_CONSTANT.items()})
    cols["control_type"] = np.full(n, None, dtype=object)
    return cols, size


def arrow_batches(
    topic: str, partition: int, file: str, file_positions: np.ndarray, cols: dict
) -> pa.RecordBatch:
    """The ``batches`` rows of one window: its columns labelled, in the contract's schema."""
    n = len(file_positions)
    control_rows = cols["control_type"] != None  # noqa: E711 (element-wise on an object array)
    control_type = (
        pa.array(cols["control_type"], pa.string()) if control_rows.any() else pa.nulls(n, pa.string())
    )
    derived = {
        "topic": pa.repeat(pa.scalar(topic, pa.string()), n),
        "partition": pa.repeat(pa.scalar(partition, pa.int32()), n),
        "file": pa.repeat(pa.scalar(file, pa.string()), n),
        "file_position": file_positions,
        "compression": _CODEC_ARROW.take(pa.array(cols["codec"].astype(np.int8))),
        "timestamp_type": _TIMESTAMP_TYPE_ARROW.take(pa.array(cols["timestamp_type"].astype(np.int8))),
        "control_type": control_type,
        "coordinator_epoch": pa.array(
            cols["coordinator_epoch"], pa.int32(), mask=~cols["has_coordinator_epoch"]
        ),
        "delete_horizon_ms": pa.array(cols["base_timestamp"], pa.int64(), mask=~cols["has_delete_horizon"]),
    }
    arrays = [
        derived[f.name] if f.name in derived else pa.array(cols[f.name], f.type) for f in schema.BATCHES
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema.BATCHES)


def _gather(buf: bytes, positions: list[int], dtype: np.dtype) -> np.ndarray:
    """The fixed-size headers at ``positions`` of ``buf`` as a NumPy record array."""
    data = np.frombuffer(buf, dtype=np.uint8)
    pos = np.asarray(positions, dtype=np.int64)
    columns = np.arange(dtype.itemsize)
    raw = np.empty((len(pos), dtype.itemsize), dtype=np.uint8)
    for start in range(0, len(pos), _GATHER_ROWS):
        block = pos[start : start + _GATHER_ROWS]
        raw[start : start + len(block)] = data[block[:, None] + columns]
    return raw.reshape(-1).view(dtype)
