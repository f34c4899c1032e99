"""Decompression (with a cap) and compression for every codec Kafka uses.

Kafka's wire forms (``clients/.../common/compress/``):
- gzip: a gzip stream (``GZIPOutputStream``); several members are read one after the other.
- snappy: Java clients write the xerial ``SnappyOutputStream`` framing: an 8-byte magic
  ``\\x82SNAPPY\\x00``, version and compatible-version int32s, then blocks of
  ``length:int32 | raw snappy``. A bare raw snappy block is accepted too.
- lz4: the LZ4 frame format (``Lz4BlockOutputStream``), 64 KiB independent blocks. Magic 0
  messages were written with a header checksum over the wrong bytes (KAFKA-3160); Kafka reads
  them by ignoring it, and so does :func:`decompress` for ``magic=0``.
- zstd: a zstd frame, usually without a content size (zstd-jni streaming).

Every decompressor stops at ``limit`` bytes of output, so a decompression bomb is a
:class:`~analytics.kafka.errors.KafkaFormatError`, never an out-of-memory.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from analytics.kafka.errors import DECOMPRESSION, KafkaFormatError
from analytics.kafka.layout import codec_name

DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024  # per batch; Kafka's own default batch cap is 1 MiB compressed

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = struct.Struct(">8sii")  # magic, version (1), compatible version (1)
XERIAL_BLOCK_LENGTH = struct.Struct(">i")
XERIAL_BLOCK_SIZE = 32 * 1024  # xerial SnappyOutputStream's default block size

ZSTD_SLICE = 512  # input bytes per decompress call: at most 16 MiB of output past the cap

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
LZ4_FLG_CONTENT_SIZE = 0x08


def decompress(codec_id: int, data, *, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES, magic: int = 2) -> bytes:
    """Decompress ``data`` written with Kafka codec ``codec_id``; at most ``limit`` bytes of output."""
    try:
        if codec_id == 1:
            return _gunzip(data, limit)
        if codec_id == 2:
            return _unsnappy(data, limit)
        if codec_id == 3:
            return _unlz4(_fix_kafka3160_header(data) if magic == 0 else data, limit)
        if codec_id == 4:
            return _unzstd(data, limit)
    except KafkaFormatError:
        raise
    except Exception as exc:  # each codec library has its own error types; all mean corrupt input
        raise KafkaFormatError(DECOMPRESSION, f"{codec_name(codec_id)} stream is corrupt: {exc}") from exc
    raise KafkaFormatError(DECOMPRESSION, f"unknown compression codec id {codec_id}")


def compress(codec_id: int, data: bytes) -> bytes:
    """Compress as Kafka's Java producer frames it (deterministic: gzip mtime is 0)."""
    if codec_id == 0:
        return bytes(data)
    if codec_id == 1:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec_id == 2:
        out = [XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
        for start in range(0, len(data), XERIAL_BLOCK_SIZE):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + XERIAL_BLOCK_SIZE]))
            out.append(XERIAL_BLOCK_LENGTH.pack(len(block)))
            out.append(block)
        return b"".join(out)
    if codec_id == 3:
        return lz4.frame.compress(
            data,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec_id == 4:
        return zstandard.ZstdCompressor(level=3, write_content_size=False).compress(data)
    raise ValueError(f"unknown compression codec id {codec_id}")


def _too_big(limit: int) -> KafkaFormatError:
    return KafkaFormatError(DECOMPRESSION, f"decompressed size exceeds the cap of {limit} bytes")


def _gunzip(data, limit: int) -> bytes:
    out = bytearray()
    rest = bytes(data)
    while rest:
        d = zlib.decompressobj(wbits=31)
        out += d.decompress(rest, limit + 1 - len(out))
        if len(out) > limit or d.unconsumed_tail:
            raise _too_big(limit)
        if not d.eof:
            raise KafkaFormatError(DECOMPRESSION, "gzip stream ends early")
        rest = d.unused_data
    return bytes(out)


def _unsnappy(data, limit: int) -> bytes:
    data = memoryview(data)
    if bytes(data[:8]) != XERIAL_MAGIC:
        return _unsnappy_raw(data, limit)
    if len(data) < XERIAL_HEADER.size:
        raise KafkaFormatError(DECOMPRESSION, "xerial snappy header is cut short")
    out = bytearray()
    pos = XERIAL_HEADER.size
    while pos < len(data):
        if pos + 4 > len(data):
            raise KafkaFormatError(DECOMPRESSION, "xerial snappy block length is cut short")
        (n,) = XERIAL_BLOCK_LENGTH.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise KafkaFormatError(DECOMPRESSION, f"xerial snappy block of {n} bytes overruns the stream")
        out += _unsnappy_raw(data[pos : pos + n], limit - len(out))
        pos += n
    return bytes(out)


def _unsnappy_raw(block, limit: int) -> bytes:
    # The raw format starts with the uncompressed length as an unsigned varint: check it first.
    size = shift = 0
    for i, b in enumerate(bytes(block[:5])):
        size |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    else:
        raise KafkaFormatError(DECOMPRESSION, "snappy block has no valid length preamble")
    if size > limit:
        raise _too_big(limit)
    return bytes(cramjam.snappy.decompress_raw(bytes(block)))


def _unlz4(data, limit: int) -> bytes:
    out = bytearray()
    rest = bytes(data)
    while rest:  # a stream may hold several frames
        d = lz4.frame.LZ4FrameDecompressor()
        out += d.decompress(rest, max_length=limit + 1 - len(out))
        if len(out) > limit or (not d.eof and d.needs_input is False):
            raise _too_big(limit)
        if not d.eof:
            raise KafkaFormatError(DECOMPRESSION, "lz4 frame ends early")
        rest = d.unused_data
    return bytes(out)


def _unzstd(data, limit: int) -> bytes:
    # zstandard's capped stream reader does not report a truncated frame, and its decompressobj
    # cannot cap output. So input goes in slices: a zstd block yields at most 128 KiB from at
    # least 4 input bytes, bounding the overshoot past the cap to ZSTD_SLICE / 4 * 128 KiB.
    out = bytearray()
    rest = memoryview(bytes(data))
    while rest:  # a stream may hold several frames
        d = zstandard.ZstdDecompressor().decompressobj()
        pos = 0
        while pos < len(rest) and not d.eof:
            out += d.decompress(rest[pos : pos + ZSTD_SLICE])
            pos += ZSTD_SLICE
            if len(out) > limit:
                raise _too_big(limit)
        if not d.eof:
            raise KafkaFormatError(DECOMPRESSION, "zstd frame ends early")
        rest = memoryview(d.unused_data) if pos >= len(rest) else memoryview(bytes(d.unused_data) + bytes(rest[pos:]))
    return bytes(out)


def _fix_kafka3160_header(data) -> bytes:
    """Rewrite the LZ4 frame header checksum that magic-0 Kafka messages got wrong (KAFKA-3160).

    The broken writers hashed the frame magic together with the descriptor; the byte is simply
    recomputed here over the descriptor alone, as the LZ4 frame spec defines it.
    """
    data = bytes(data)
    if len(data) < 7 or data[:4] != LZ4_FRAME_MAGIC:
        return data
    descriptor_end = 6 + (8 if data[4] & LZ4_FLG_CONTENT_SIZE else 0)
    if len(data) <= descriptor_end:
        return data
    checksum = (xxh32(data[4:descriptor_end]) >> 8) & 0xFF
    return data[:descriptor_end] + bytes([checksum]) + data[descriptor_end + 1 :]


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of short inputs (the LZ4 frame header checksum).

    >>> hex(xxh32(b""))
    '0x2cc5d05'
    """
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos : pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[pos : pos + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
