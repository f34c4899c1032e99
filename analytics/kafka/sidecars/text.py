"""Text sidecar files as the broker's Java code reads them: lines, whitespace, integers.

The checkpoints and ``partition.metadata`` are read with ``BufferedReader.readLine``,
``String.split("\\\\s+")`` and ``Integer.parseInt`` / ``Long.parseLong``; these helpers follow
those, not Python's looser defaults.
"""

from __future__ import annotations

import re

from analytics.kafka.sidecars.results import corrupt

# BufferedReader.readLine ends a line at "\n", "\r" or "\r\n".
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
# Java's \s is ASCII whitespace only; str.split() would also split on NBSP and other Unicode spaces.
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")
# One whitespace-free token: what a topic name or topic id must be to read back.
TOKEN = re.compile(r"[^ \t\n\x0b\f\r]+")
# Integer.parseInt / Long.parseLong syntax. Java would also take non-ASCII digits, which no broker
# writes; here they make the line malformed.
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_QUOTE_LIMIT = 80  # characters of a bad line quoted in an error message


def as_bytes(data: bytes | str) -> bytes:
    # Text is encoded back so error positions are byte positions; "surrogatepass" turns lone
    # surrogates into bytes that the UTF-8 check then reports instead of raising here.
    return data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)


def lines(data: bytes) -> list[tuple[int, str]]:
    """(byte position, text) of each line, split as BufferedReader.readLine splits them."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # The broker reads these files with a strict UTF-8 decoder (MalformedInputException).
        raise corrupt(
            f"not UTF-8: byte {data[exc.start]:#04x} at position {exc.start}", exc.start, len(data)
        ) from None
    found = []
    start = 0
    for line_break in _LINE_BREAK.finditer(data):
        found.append((start, data[start : line_break.start()].decode("utf-8")))
        start = line_break.end()
    if start < len(data):
        found.append((start, data[start:].decode("utf-8")))
    return found


def java_split(line: str) -> list[str]:
    # String.split("\\s+") keeps a leading empty field but drops trailing ones.
    fields = _JAVA_WHITESPACE.split(line)
    while fields and not fields[-1]:
        fields.pop()
    return fields


def java_integer(text: str, bits: int) -> int | None:
    """Integer.parseInt (bits 32) or Long.parseLong (bits 64); None where Java would throw."""
    if not _JAVA_INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if -(1 << (bits - 1)) <= value < 1 << (bits - 1) else None


def checked(value: int, bits: int, name: str) -> int:
    # Writers refuse what the field cannot hold, as struct.pack does for the binary files.
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise ValueError(f"{name} {value} does not fit in int{bits}")
    return value


def quote(text: str) -> str:
    return repr(text if len(text) <= _QUOTE_LIMIT else text[:_QUOTE_LIMIT] + "...")
