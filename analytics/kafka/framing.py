"""Where the entries of a segment start: the framing walk over one window of its bytes.

The walk mirrors the format (``Records.java``): each entry starts with ``offset:int64 |
size:int32`` and has its magic at byte 16, so framing is uniform across magics. One tight loop
per v2 batch collects positions; anything else (legacy entries, bad sizes, tails) takes the
general path, one entry at a time. A size field is checked against the bytes of the file before
the entry is read, so an entry that does not fit the window asks for more bytes instead of being
guessed at.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from analytics.kafka import errors as E
from analytics.kafka import layout as L

# size:int32 | (partitionLeaderEpoch or legacy crc):int32 | magic:int8, read at entry offset 8
# in one call: what the walk needs to frame an entry.
_SIZE_MAGIC = struct.Struct(">i4xb")
_FRAME_HEAD_AT = 8  # the size field follows the int64 offset
FRAME_HEAD_END = L.ATTRIBUTES_OFFSET  # 21: an entry's bytes needed to frame it and find its CRC


@dataclass(slots=True)
class Walk:
    """Positions found in one window, and why the walk of the window ended."""

    v2: list[int] = field(default_factory=list)
    legacy: list[int] = field(default_factory=list)
    next_pos: int = 0  # window position where the next walk starts
    need: int = 0  # bytes needed from next_pos when an entry did not fit the window
    stop: tuple[str, str] | None = None  # (error kind, message) ending the file at next_pos


def walk_window(buf: bytes, file_remaining: int) -> Walk:
    """Frame the entries of ``buf``, a window of a file with ``file_remaining`` bytes from its start."""
    walk = Walk()
    n = len(buf)
    pos = 0
    while pos < n:
        pos = _walk_v2_run(buf, pos, min(n, file_remaining), walk.v2)
        if pos >= n:
            break
        # Anything but a complete v2 batch: the general path, one entry at a time.
        if pos + FRAME_HEAD_END > n:
            if n < file_remaining:  # more of the file follows: read it with the next window
                walk.need = FRAME_HEAD_END
                break
            if pos + L.FRAME_AND_MAGIC <= n and buf[pos + L.MAGIC_OFFSET] not in (0, 1, 2):
                walk.stop = _unknown_magic(buf[pos + L.MAGIC_OFFSET])
            else:
                walk.stop = (E.TRUNCATED, f"{n - pos} bytes at the end are too few for an entry header")
            break
        size, magic = _SIZE_MAGIC.unpack_from(buf, pos + _FRAME_HEAD_AT)
        if magic == L.MAGIC_V2:
            minimum = L.MIN_V2_SIZE_FIELD
        elif magic == L.MAGIC_V0 or magic == L.MAGIC_V1:
            minimum = L.MIN_LEGACY_SIZE_FIELD[magic]
        else:
            walk.stop = _unknown_magic(magic)
            break
        if size < minimum:
            walk.stop = (
                E.INVALID_LENGTH,
                f"size field {size} is below the minimum {minimum} for magic {magic}",
            )
            break
        end = pos + L.LOG_OVERHEAD + size
        if end > file_remaining:
            walk.stop = (
                E.TRUNCATED,
                (
                    f"entry of {size + L.LOG_OVERHEAD} bytes runs {end - file_remaining} bytes"
                    " past the end of the file"
                ),
            )
            break
        if end > n:
            walk.need = end - pos
            break
        (walk.v2 if magic == L.MAGIC_V2 else walk.legacy).append(pos)
        pos = end
    walk.next_pos = pos
    return walk


def _walk_v2_run(buf: bytes, pos: int, end_limit: int, positions: list[int]) -> int:
    """Append the positions of the complete v2 batches that follow one another from ``pos``.

    This loop runs once per batch, so it does the least that framing needs: it stops at the
    first entry that is not a complete, well-sized v2 batch inside ``buf[:end_limit]`` and
    returns its position for the general path. CRCs are computed afterwards in one pass.
    """
    unpack = _SIZE_MAGIC.unpack_from
    append = positions.append
    last_start = len(buf) - FRAME_HEAD_END
    while pos <= last_start:
        size, magic = unpack(buf, pos + _FRAME_HEAD_AT)
        end = pos + L.LOG_OVERHEAD + size
        if magic != L.MAGIC_V2 or size < L.MIN_V2_SIZE_FIELD or end > end_limit:
            return pos
        append(pos)
        pos = end
    return pos


def _unknown_magic(magic: int) -> tuple[str, str]:
    return E.UNKNOWN_MAGIC, f"magic byte {magic} is not 0, 1 or 2"
