"""Checksums, varints and sequence arithmetic shared by the readers and the writer.

CRC-32C uses the ``crc32c`` package, which picks the SSE4.2 / ARMv8 CRC instructions at
import time and falls back to a table-driven implementation elsewhere.
Varints follow ``org.apache.kafka.common.utils.ByteUtils`` (protobuf ZigZag).
Sequence arithmetic follows ``DefaultRecordBatch.incrementSequence / decrementSequence``.
"""

from __future__ import annotations

import codecs
import zlib

from crc32c import crc32c as _crc32c

from analytics.contract.vocabulary import INT_MAX, SEQ_SPACE
from analytics.kafka.errors import RECORD_DECODE, KafkaFormatError


def crc32c(data) -> int:
    """CRC-32C (Castagnoli) of a bytes-like object, as Kafka's ``Crc32C``.

    >>> hex(crc32c(b"123456789"))
    '0xe3069283'
    """
    return _crc32c(data)


def crc32(data) -> int:
    """CRC-32 (IEEE), the checksum of legacy magic 0/1 messages.

    >>> hex(crc32(b"123456789"))
    '0xcbf43926'
    """
    return zlib.crc32(data) & 0xFFFFFFFF


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Decode a ZigZag varint (at most 5 bytes) at ``pos``; returns (value, next position).

    >>> read_varint(bytes([0x02]), 0), read_varint(bytes([0x01]), 0)
    ((1, 1), (-1, 1))
    """
    return _read_zigzag(buf, pos, 5)


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Decode a ZigZag varlong (at most 10 bytes) at ``pos``; returns (value, next position)."""
    return _read_zigzag(buf, pos, 10)


def _read_zigzag(buf, pos: int, max_bytes: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    end = len(buf)
    for i in range(max_bytes):
        if pos >= end:
            raise KafkaFormatError(RECORD_DECODE, "varint runs past the end of the data")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise KafkaFormatError(RECORD_DECODE, f"varint longer than {max_bytes} bytes")


def encode_varint(value: int) -> bytes:
    """ZigZag-encode a signed 32-bit value (``ByteUtils.writeVarint``).

    >>> encode_varint(1), encode_varint(-1), encode_varint(300)
    (b'\\x02', b'\\x01', b'\\xd8\\x04')
    """
    return _encode_zigzag(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """ZigZag-encode a signed 64-bit value (``ByteUtils.writeVarlong``)."""
    return _encode_zigzag(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _encode_zigzag(raw: int) -> bytes:
    out = bytearray()
    while raw & ~0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def increment_sequence(sequence: int, increment: int) -> int:
    """Add modulo 2^31 over [0, INT_MAX] (``DefaultRecordBatch.incrementSequence``).

    >>> increment_sequence(5, 5), increment_sequence(INT_MAX, 1), increment_sequence(INT_MAX - 5, 10)
    (10, 0, 4)
    """
    if sequence > INT_MAX - increment:
        return increment - (INT_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Subtract modulo 2^31 over [0, INT_MAX] (``DefaultRecordBatch.decrementSequence``).

    >>> decrement_sequence(5, 5), decrement_sequence(0, 1)
    (0, 2147483647)
    """
    if sequence < decrement:
        return INT_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last: int, nxt: int) -> bool:
    """``ProducerAppendInfo.inSequence``: last + 1 (as a long, so INT_MAX + 1 is not 0), or 0 after INT_MAX.

    >>> in_sequence(4, 5), in_sequence(INT_MAX, 0), in_sequence(INT_MAX, 1), in_sequence(-1, 0)
    (True, True, False, True)
    """
    return nxt == last + 1 or (nxt == 0 and last == INT_MAX)


def sequence_ahead(last: int, nxt: int) -> bool:
    """``nxt`` lies beyond ``last + 1`` going forward mod 2^31 (a gap), rather than at or before it.

    >>> sequence_ahead(4, 9), sequence_ahead(4, 2), sequence_ahead(INT_MAX - 1, 3)
    (True, False, True)
    """
    return 0 < (nxt - last - 1) % SEQ_SPACE < SEQ_SPACE // 2


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The last sequence of a batch: -1 without a sequence, else base + delta with the int32 wrap.

    >>> last_sequence(INT_MAX - 1, 2), last_sequence(-1, 4)
    (0, -1)
    """
    if base_sequence == -1:
        return -1
    return increment_sequence(base_sequence, last_offset_delta)


_REPLACEMENT = "\ufffd"


def java_utf8(data: bytes) -> str:
    """``new String(bytes, UTF_8)``: Kafka's text of a header key, and the dump tool's of a key or payload.

    Valid UTF-8 decodes as everywhere. Malformed input becomes U+FFFD as the JDK's decoder
    (``String.decodeUTF8_UTF16``) replaces it, which is not Python's ``errors="replace"``: an
    encoded surrogate is one replacement, not three, and a lead byte with one good continuation
    byte before a bad one is one replacement for both.

    >>> java_utf8(b"\\xed\\xa0\\x80x"), b"\\xed\\xa0\\x80x".decode("utf-8", "replace")
    ('\\ufffdx', '\\ufffd\\ufffd\\ufffdx')
    >>> java_utf8(b"\\x94\\xed\\xb5\\xef1")
    '\\ufffd\\ufffd\\ufffd1'
    """
    # Both decoders accept the same sequences and walk the input the same way, so Python's
    # decoder does the work and only the malformed spots go through _java_malformed.
    return data.decode("utf-8", _JAVA_ERRORS)


def _java_malformed(error: UnicodeDecodeError) -> tuple[str, int]:
    """One U+FFFD for the bytes the JDK takes as one malformed sequence at ``error.start``."""
    data, start = error.object, error.start
    return _REPLACEMENT, start + _java_malformed_length(data, start)


def _java_malformed_length(data: bytes, sp: int) -> int:
    """How many bytes from ``sp``, where a malformed sequence starts, the JDK replaces with one U+FFFD
    (``malformed3``, ``malformed4`` and the cases of a sequence cut short by the end of the input)."""
    sl = len(data)
    b1 = data[sp]
    left = sl - sp - 1  # bytes after b1
    if b1 >> 4 == 0b1110:  # E0..EF
        if left >= 2:
            b2 = data[sp + 1]
            if (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _continuation(b2):
                return 1
            if not _continuation(data[sp + 2]):
                return 2
            return 3  # an encoded surrogate
        if left == 1 and ((b1 == 0xE0 and data[sp + 1] & 0xE0 == 0x80) or not _continuation(data[sp + 1])):
            return 1
        return sl - sp  # cut short: the rest of the input
    if b1 >> 3 == 0b11110:  # F0..F7
        if left >= 3:
            if b1 > 0xF4 or _bad_second_of_four(b1, data[sp + 1]):
                return 1
            return 2 if not _continuation(data[sp + 2]) else 3
        if b1 > 0xF4 or (left >= 1 and _bad_second_of_four(b1, data[sp + 1])):
            return 1
        if left >= 2 and not _continuation(data[sp + 2]):
            return 2
        return sl - sp
    return 1  # a lone continuation byte, C0, C1, F8..FF, or C2..DF without its continuation byte


def _continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _bad_second_of_four(b1: int, b2: int) -> bool:
    return (
        (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and b2 & 0xF0 != 0x80) or not _continuation(b2)
    )


_JAVA_ERRORS = "segaudit-java-utf8"
codecs.register_error(_JAVA_ERRORS, _java_malformed)
