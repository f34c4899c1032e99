"""The ``name: value`` tokens of one ``kafka-dump-log.sh`` line, read as typed values.

A line is read as tokens, not with one regex per Kafka version, so key order and extra tokens do
not matter; names are compared lower-cased (``keySize`` in HEAD, ``keysize`` up to 2.7). The token
whose name is ``CreateTime`` / ``LogAppendTime`` / ``NoTimestampType`` carries the timestamp type
in its name. With ``--print-data-log`` a record line ends with ``key: K payload: P``, whose texts
may hold spaces: that data part is kept whole, under the name ``""``.

Every reader raises :class:`BadLine` where the text is not what the tool prints; the parser turns
it into a ``dump_line`` error row.
"""

from __future__ import annotations

import re

from analytics.kafka.layout import (
    CODEC_IDS,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    END_TXN_MARKER_TYPES,
    NO_TIMESTAMP_TYPE,
    TIMESTAMP_TYPE_MASK,
    TIMESTAMP_TYPES,
    TRANSACTIONAL_MASK,
)

PAYLOAD_PREFIX = "payload: "
_KEY_PREFIX = "key: "
_PAYLOAD_SEPARATOR = " " + PAYLOAD_PREFIX

_TOKEN = re.compile(r"([A-Za-z]\w*): ")
_INTEGER = re.compile(r"-?\d+")
# headerKeys: [k1,k2] -- keys may hold spaces, so the list ends at "]" before a space or the end.
_HEADER_KEYS = re.compile(r"\[([^\]]*)\](?: |$)")
_OPTIONAL_LONG = re.compile(r"OptionalLong(?:\.empty|\[(-?\d+)\])")
_CONTROL_TYPE = re.compile(r"(\w+)\((-?\d+)\)")
# Token names are compared lower-cased; these map back.
_TIMESTAMP_TYPE_NAMES = {name.lower(): name for name in (*TIMESTAMP_TYPES, NO_TIMESTAMP_TYPE)}


class BadLine(Exception):
    """A dump line that does not parse; the parser turns it into a ParseError row."""


def split_fields(text: str) -> dict[str, str]:
    """The ``name: value`` tokens of a line, names lower-cased; the printed data part under ``""``.

    A value runs to the next space, except ``headerKeys: [...]`` and the trailing
    ``key: … payload: …`` data, whose texts may hold spaces.

    >>> split_fields("offset: 5 CreateTime: 9 headerKeys: [a b,c] key: k 1 payload: v: 2")
    {'offset': '5', 'createtime': '9', 'headerkeys': 'a b,c', '': 'key: k 1 payload: v: 2'}
    """
    fields: dict[str, str] = {}
    position, end = 0, len(text)
    while position < end:
        token = _TOKEN.match(text, position)
        if token is None:
            raise BadLine(f"expected 'name: value' at column {position + 1}")
        name = token.group(1)
        position = token.end()
        if name in ("key", "payload"):
            fields[""] = text[token.start() :]
            break
        if name == "headerKeys":
            keys = _HEADER_KEYS.match(text, position)
            if keys is None:
                raise BadLine("headerKeys is not a [k1,k2] list")
            value, position = keys.group(1), keys.end()
        else:
            stop = text.find(" ", position)
            stop = end if stop == -1 else stop
            value, position = text[position:stop], stop + 1
        # The 2.8 record line repeats no name; should a line do so, the first value counts.
        fields.setdefault(name.lower(), value)
    return fields


def no_data(fields: dict[str, str]) -> dict[str, str]:
    """The fields of a batch line, which never carries key or payload text."""
    if "" in fields:
        raise BadLine("key or payload on a batch line")
    return fields


def key_and_payload(data: str | None) -> tuple[bytes | None, bytes | None]:
    """Split ``key: K payload: P``; a key holding `` payload: `` itself cannot be told apart."""
    if data is None:
        return None, None
    if data.startswith(PAYLOAD_PREFIX):
        return None, data[len(PAYLOAD_PREFIX) :].encode("utf-8")
    key = data[len(_KEY_PREFIX) :]
    cut = key.find(_PAYLOAD_SEPARATOR)
    if cut == -1:
        return key.encode("utf-8"), None
    return key[:cut].encode("utf-8"), key[cut + len(_PAYLOAD_SEPARATOR) :].encode("utf-8")


def int_field(fields: dict[str, str], name: str, default: int | None = None) -> int:
    value = fields.get(name)
    if value is None:
        if default is None:
            raise BadLine(f"no {name} field")
        return default
    if not _INTEGER.fullmatch(value):
        raise BadLine(f"{name} is not an integer: {value!r}")
    return int(value)


def crc_field(fields: dict[str, str]) -> int | None:
    """The printed checksum; None where a format leaves it out (the ≤ 2.1 deep lines)."""
    return int_field(fields, "crc") if "crc" in fields else None


def bool_field(fields: dict[str, str], name: str, default: bool | None = None) -> bool:
    value = fields.get(name)
    if value is None and default is not None:
        return default
    if value not in ("true", "false"):
        raise BadLine(f"{name} is not true or false: {value!r}")
    return value == "true"


def timestamp_field(fields: dict[str, str]) -> tuple[str, int]:
    """The timestamp type, named by the token, and the timestamp."""
    for name, timestamp_type in _TIMESTAMP_TYPE_NAMES.items():
        if name in fields:
            return timestamp_type, int_field(fields, name)
    raise BadLine("no CreateTime, LogAppendTime or NoTimestampType field")


def compression_field(fields: dict[str, str]) -> str:
    # Up to 2.8 the Java enum name was printed (NONE, GZIP, ...), from 3.0 the lower-case name.
    name = fields.get("compresscodec", "").lower()
    if name not in CODEC_IDS:
        raise BadLine(f"unknown compresscodec {fields.get('compresscodec')!r}")
    return name


def delete_horizon_field(fields: dict[str, str]) -> int | None:
    value = fields.get("deletehorizonms")
    if value is None:  # ≤ 3.1 does not print the field
        return None
    match = _OPTIONAL_LONG.fullmatch(value)
    if match is None:
        raise BadLine(f"deleteHorizonMs is not an OptionalLong: {value!r}")
    return None if match.group(1) is None else int(match.group(1))


def control_field(fields: dict[str, str]) -> tuple[str, int | None] | None:
    """Control type and coordinator epoch named by a record line, or None for a data record."""
    marker = fields.get("endtxnmarker")
    if marker is not None:
        if marker not in END_TXN_MARKER_TYPES:
            raise BadLine(f"endTxnMarker is not COMMIT or ABORT: {marker!r}")
        return marker, int_field(fields, "coordinatorepoch")
    control_type = fields.get("controltype")
    if control_type is None:
        return None
    match = _CONTROL_TYPE.fullmatch(control_type)
    if match is None:
        raise BadLine(f"controlType is not NAME(id): {control_type!r}")
    return match.group(1), None


def attributes(
    compression: str, timestamp_type: str, transactional: bool, control: bool, horizon: bool
) -> int:
    """The attribute bits the printed flags stand for (§1.3); unused bits are not in the dump."""
    return (
        CODEC_IDS[compression]
        | (TIMESTAMP_TYPE_MASK if timestamp_type == "LogAppendTime" else 0)
        | (TRANSACTIONAL_MASK if transactional else 0)
        | (CONTROL_MASK if control else 0)
        | (DELETE_HORIZON_MASK if horizon else 0)
    )
