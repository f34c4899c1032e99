"""Hypothesis strategies and helpers that build valid segments with the writer, for the reader tests."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from analytics.kafka import layout as L
from analytics.kafka.util import last_sequence
from analytics.kafka.writer import (
    RecordSpec,
    build_batch,
    build_end_txn_marker,
    build_legacy_message,
    build_legacy_wrapper,
)

CODECS = list(L.CODEC_NAMES)


@dataclass(frozen=True)
class Expected:
    """What the reader must report for one written entry."""

    magic: int
    base_offset: int
    last_offset: int
    record_count: int
    compression: str
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    is_transactional: bool
    is_control: bool
    control_type: str | None
    coordinator_epoch: int | None
    records: tuple  # (offset, key, value, headers)


small_bytes = st.one_of(st.none(), st.binary(max_size=40))
header = st.tuples(st.text(max_size=8), small_bytes)
record = st.builds(
    RecordSpec,
    key=small_bytes,
    value=small_bytes,
    timestamp=st.integers(0, 2**41),
    headers=st.lists(header, max_size=3).map(tuple),
)


@st.composite
def entries(draw, min_size: int = 1, max_size: int = 8):
    """A list of (bytes, Expected) entries with contiguous offsets, as a broker writes a segment."""
    out = []
    offset = draw(st.integers(0, 2**40))
    for _ in range(draw(st.integers(min_size, max_size))):
        kind = draw(st.sampled_from(["v2", "v2", "v2", "marker", "legacy"]))
        if kind == "v2":
            recs = draw(st.lists(record, min_size=1, max_size=5))
            codec = draw(st.sampled_from(CODECS))
            idempotent = draw(st.booleans())
            pid = draw(st.integers(0, 2**62)) if idempotent else -1
            epoch = draw(st.integers(0, 32767)) if idempotent else -1
            seq = draw(st.integers(0, L.INT_MAX)) if idempotent else -1
            txn = idempotent and draw(st.booleans())
            data = build_batch(
                offset,
                recs,
                compression=codec,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
                is_transactional=txn,
                partition_leader_epoch=draw(st.integers(-1, 1000)),
            )
            n = len(recs)
            out.append(
                (
                    data,
                    Expected(
                        2, offset, offset + n - 1, n, codec, pid, epoch, seq, last_sequence(seq, n - 1),
                        txn, False, None, None,
                        tuple((offset + i, r.key, r.value, r.headers) for i, r in enumerate(recs)),
                    ),
                )
            )
            offset += n
        elif kind == "marker":
            ctype = draw(st.sampled_from(["COMMIT", "ABORT"]))
            pid = draw(st.integers(0, 2**62))
            epoch = draw(st.integers(0, 32767))
            ce = draw(st.integers(0, 2**31 - 1))
            data = build_end_txn_marker(
                offset, ctype, producer_id=pid, producer_epoch=epoch, coordinator_epoch=ce, timestamp=draw(st.integers(0, 2**41))
            )
            key = L.CONTROL_KEY.pack(0, L.CONTROL_TYPE_IDS[ctype])
            value = L.END_TXN_MARKER_VALUE.pack(0, ce)
            out.append(
                (data, Expected(2, offset, offset, 1, "none", pid, epoch, -1, -1, True, True, ctype, ce, ((offset, key, value, ()),)))
            )
            offset += 1
        else:
            magic = draw(st.sampled_from([0, 1]))
            recs = draw(st.lists(record, min_size=1, max_size=4))
            codec = draw(st.sampled_from(CODECS))
            if codec == "none":
                r = recs[0]
                data = build_legacy_message(offset, r.key, r.value, magic=magic, timestamp=r.timestamp if magic else -1)
                recs = recs[:1]
            else:
                data = build_legacy_wrapper(list(range(offset, offset + len(recs))), recs, compression=codec, magic=magic)
            n = len(recs)
            out.append(
                (
                    data,
                    Expected(
                        magic, offset, offset + n - 1, n, codec, -1, -1, -1, -1, False, False, None, None,
                        tuple((offset + i, r.key, r.value, ()) for i, r in enumerate(recs)),
                    ),
                )
            )
            offset += n
    return out
