"""Fields of Kafka's generated messages (the coordinators' record keys and values, the KRaft metadata
log's records), read big-endian with the bounds checked: fixed-width integers, unsigned varints,
strings and arrays in the classic and the flexible (compact, tagged) encodings. Every malformed
field is a :class:`~analytics.kafka.errors.KafkaFormatError` of kind ``record_decode``."""

from __future__ import annotations

import struct

from analytics.kafka.errors import RECORD_DECODE, KafkaFormatError
from analytics.kafka.util import java_utf8


class Fields:
    """A message's bytes read field by field; ``what`` names it in errors ("transaction log value")."""

    def __init__(self, data: bytes, what: str):
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise KafkaFormatError(RECORD_DECODE, f"{self.what} ends inside a field at byte {self.pos}")
        self.pos += n
        return bytes(self.data[self.pos - n:self.pos])

    def fixed(self, fmt: str) -> int:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def int8(self) -> int:
        return self.fixed(">b")

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise KafkaFormatError(RECORD_DECODE, f"{self.what}: an unsigned varint longer than 5 bytes")

    def string(self, flexible: bool = True, nullable: bool = False) -> str | None:
        """A string (compact when ``flexible``); None for a null one where ``nullable``."""
        n = self.uvarint() - 1 if flexible else self.fixed(">h")
        if n < 0:
            if nullable:
                return None
            raise KafkaFormatError(RECORD_DECODE, f"{self.what}: a null string where Kafka writes none")
        return java_utf8(self.take(n))

    def uuid(self) -> str:
        return self.take(16).hex()

    def length(self, flexible: bool) -> int:
        """An array's length; -1 for null."""
        return self.uvarint() - 1 if flexible else self.fixed(">i")

    def tags(self) -> dict[int, bytes]:
        """The tagged fields, by tag."""
        fields = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.take(self.uvarint())
        return fields

    def done(self) -> None:
        """Nothing is left after the last field."""
        if self.pos != len(self.data):
            raise KafkaFormatError(RECORD_DECODE, f"{self.what}: {len(self.data) - self.pos} bytes after the last field")
