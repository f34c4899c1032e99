"""The whole entries of a Fetch response that belong to one offset range of a partition.

A Fetch response carries a partition's log bytes as they sit in its segments, from the entry that
holds the fetch offset, cut at the response's byte limit (its last entry is often partial). An
export over the protocol splits a partition's captured offsets ``[start, end)`` into ranges, one
Spark task each, and every entry belongs to exactly one range:

- an entry whose last offset is below ``start`` belongs to an earlier range (it is dropped);
- an entry that holds ``start`` but begins below it (a compressed batch, or a log start offset
  inside a batch) belongs to the partition's first range only (``first``);
- an entry that begins at or after ``end`` belongs to a later range, and ends this one.

:func:`frame_fetched` frames the response the way the segment walk does
(:mod:`analytics.kafka.framing`: offset, size and magic first, sizes checked before use) and says
which bytes to decode, where the next fetch starts and whether the range is done.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from analytics.kafka import errors as E
from analytics.kafka import layout as L

_OFFSET_SIZE = struct.Struct(">qi")  # an entry's offset and size field
_LAST_DELTA = struct.Struct(">i")  # a v2 batch's lastOffsetDelta


@dataclass(frozen=True, slots=True)
class Framed:
    """What to do with one Fetch response: decode ``buf[keep_from:keep_to]`` (whole entries of the
    range, possibly none), fetch next from ``next_offset``."""

    keep_from: int
    keep_to: int
    next_offset: int  # the offset after the last whole entry framed (the fetch offset when none was)
    done: bool  # an entry at or after the range's end was reached
    first_offset: int | None = None  # the base offset of the first entry kept
    need: int = 0  # bytes of an entry that did not fit the response: fetch again with at least these
    stop: tuple[str, str] | None = None  # (error kind, message): the bytes at keep_to do not frame


def frame_fetched(buf: bytes, *, fetch_offset: int, start: int, end: int, first: bool) -> Framed:
    """Frame ``buf``, the records of a Fetch response at ``fetch_offset``, for the range ``[start, end)``
    (``first``: the partition's first range, which keeps an entry that straddles ``start``)."""
    n = len(buf)
    pos = 0
    keep_from = keep_to = first_offset = None
    next_offset = fetch_offset
    while pos + L.LOG_OVERHEAD <= n:
        offset, size = _OFFSET_SIZE.unpack_from(buf, pos)
        if pos + L.FRAME_AND_MAGIC > n:
            break
        magic = buf[pos + L.MAGIC_OFFSET]
        stop = _bad_frame(size, magic)
        if stop:
            return _framed(pos, keep_from, keep_to, next_offset, False, first_offset, stop=stop)
        entry_end = pos + L.LOG_OVERHEAD + size
        if entry_end > n:
            break
        if magic == L.MAGIC_V2:
            base, last = offset, offset + _LAST_DELTA.unpack_from(buf, pos + L.ATTRIBUTES_OFFSET + 2)[0]
        else:  # a legacy entry's offset is its last (a wrapper's: its last inner message's)
            base = last = offset
        if base >= end:
            return _framed(pos, keep_from, keep_to, next_offset, True, first_offset)
        if last >= start and (base >= start or first):
            if keep_from is None:
                keep_from, first_offset = pos, base
            keep_to = entry_end
        next_offset = max(next_offset, last + 1)
        pos = entry_end
    need = 0
    if pos == 0 and n:  # not even one whole entry: the response's limit is below the entry's size
        need = L.LOG_OVERHEAD + _OFFSET_SIZE.unpack_from(buf, 0)[1] if n >= L.LOG_OVERHEAD else L.LOG_OVERHEAD
    return _framed(pos, keep_from, keep_to, next_offset, next_offset >= end, first_offset, need=need)


def _bad_frame(size: int, magic: int) -> tuple[str, str] | None:
    if magic not in (L.MAGIC_V0, L.MAGIC_V1, L.MAGIC_V2):
        return E.UNKNOWN_MAGIC, f"magic byte {magic} is not 0, 1 or 2"
    minimum = L.MIN_V2_SIZE_FIELD if magic == L.MAGIC_V2 else L.MIN_LEGACY_SIZE_FIELD[magic]
    if size < minimum:
        return E.INVALID_LENGTH, f"size field {size} is below the minimum {minimum} for magic {magic}"
    return None


def _framed(pos, keep_from, keep_to, next_offset, done, first_offset, *, need=0, stop=None) -> Framed:
    if keep_from is None:
        keep_from = keep_to = pos
    return Framed(keep_from, keep_to, next_offset, done, first_offset, need, stop)
