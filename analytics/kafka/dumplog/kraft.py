"""KRaft control records as DumpLogSegments prints them: the JSON of their message.

The tool decodes the value of a LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION or
KRAFT_VOTERS record with the message's generated reader and prints it with
``<Name>JsonConverter.write``: Jackson's compact JSON, fields in schema order.
"""

from __future__ import annotations

import base64
import struct

from analytics.kafka.util import java_utf8


class _MessageReader:
    """The fields of a flexible-version Kafka message (``ByteBufferAccessor``); ValueError past the end."""

    def __init__(self, data: bytes):
        self.data = data
        self.position = 0

    def take(self, size: int) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise ValueError("message runs past its bytes")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def number(self, layout: str) -> int:
        fmt = struct.Struct(">" + layout)
        return fmt.unpack(self.take(fmt.size))[0]

    def unsigned_varint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise ValueError("varint longer than 5 bytes")

    def array(self, read_item) -> list:
        length = self.unsigned_varint() - 1  # compact array: length + 1, 0 for null
        if length < 0 or length > len(self.data) - self.position:
            raise ValueError("bad array length")
        return [read_item() for _ in range(length)]

    def string(self) -> str:
        length = self.unsigned_varint() - 1
        if length < 0 or length > 0x7FFF:
            raise ValueError("bad string length")
        return java_utf8(self.take(length))

    def uuid(self) -> str:
        # Uuid.toString: URL-safe base64 of the 16 bytes, without padding.
        return base64.urlsafe_b64encode(self.take(16)).decode("ascii").rstrip("=")

    def tagged_fields(self) -> None:
        for _ in range(self.unsigned_varint()):
            self.unsigned_varint()  # tag
            self.take(self.unsigned_varint())


def _leader_change(reader: _MessageReader) -> dict:
    # Read at version 0 (ControlRecordUtils), written as JSON at the version its Version field names.
    version = reader.number("h")
    leader_id = reader.number("i")

    def voter() -> dict:
        voter_id = reader.number("i")
        reader.tagged_fields()
        item: dict = {"voterId": voter_id}
        if version >= 1:  # VoterDirectoryId (1+): not read at version 0, so Uuid.ZERO_UUID
            item["voterDirectoryId"] = "AAAAAAAAAAAAAAAAAAAAAA"
        return item

    voters = reader.array(voter)
    granting = reader.array(voter)
    reader.tagged_fields()
    return {"version": version, "leaderId": leader_id, "voters": voters, "grantingVoters": granting}


def _snapshot_header(reader: _MessageReader) -> dict:
    version, timestamp = reader.number("h"), reader.number("q")
    reader.tagged_fields()
    return {"version": version, "lastContainedLogTimestamp": timestamp}


def _snapshot_footer(reader: _MessageReader) -> dict:
    version = reader.number("h")
    reader.tagged_fields()
    return {"version": version}


def _kraft_version(reader: _MessageReader) -> dict:
    version, kraft_version = reader.number("h"), reader.number("h")
    reader.tagged_fields()
    return {"version": version, "kRaftVersion": kraft_version}


def _kraft_voters(reader: _MessageReader) -> dict:
    def endpoint() -> dict:
        item = {"name": reader.string(), "host": reader.string(), "port": reader.number("H")}
        reader.tagged_fields()
        return item

    def voter() -> dict:
        voter_id, directory_id = reader.number("i"), reader.uuid()
        endpoints = reader.array(endpoint)
        low, high = reader.number("h"), reader.number("h")
        reader.tagged_fields()  # of KRaftVersionFeature
        reader.tagged_fields()  # of Voter
        return {
            "voterId": voter_id,
            "voterDirectoryId": directory_id,
            "endpoints": endpoints,
            "kRaftVersionFeature": {"minSupportedVersion": low, "maxSupportedVersion": high},
        }

    version = reader.number("h")
    voters = reader.array(voter)
    reader.tagged_fields()
    return {"version": version, "voters": voters}


# Control type -> (what the tool prints before the JSON, the message reader).
_CONTROL_JSON = {
    "LEADER_CHANGE": (" LeaderChange: ", _leader_change),
    "SNAPSHOT_HEADER": (" SnapshotHeader ", _snapshot_header),
    "SNAPSHOT_FOOTER": (" SnapshotFooter ", _snapshot_footer),
    "KRAFT_VERSION": (" KRaftVersion ", _kraft_version),
    "KRAFT_VOTERS": (" KRaftVoters ", _kraft_voters),
}


def control_json(name: str, value: bytes | None) -> str | None:
    """`` SnapshotHeader {"version":0,…}`` and the like; None for other types or an undecodable value.

    >>> control_json("KRAFT_VERSION", bytes([0, 0, 0, 1, 0]))
    ' KRaftVersion {"version":0,"kRaftVersion":1}'
    """
    known = _CONTROL_JSON.get(name)
    if known is None or value is None:
        return None
    prefix, read = known
    try:
        message = read(_MessageReader(value))
    except (ValueError, struct.error):
        return None
    return prefix + _json(message)


def _json(value) -> str:
    """Jackson's compact JSON (``JsonNode.toString``): no spaces, non-ASCII kept, upper-case \\u escapes."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_json_string(k)}:{_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json(v) for v in value) + "]"
    if isinstance(value, str):
        return _json_string(value)
    return str(value)


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _json_string(text: str) -> str:
    out = []
    for char in text:
        if char in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
