"""The reader's one domain error, and the names of the problems it reports.

Inside the reader a problem is raised as :class:`KafkaFormatError`; at the boundary of a file
every problem becomes a :class:`~analytics.kafka.model.ParseError` row, so bad bytes are data,
never a crash.
"""

from __future__ import annotations

# error_kind values of parse_errors rows. Kinds marked "stops the file" end the walk of a segment:
# after them the framing cannot be trusted, so the rest of the file is one error.
TRUNCATED = "truncated"  # an entry runs past the end of the file (stops the file)
ZERO_FILLED = "zero_filled"  # the rest of the file is zeros: a preallocated segment's tail (stops)
INVALID_LENGTH = "invalid_length"  # size field negative or below its magic's minimum (stops)
UNKNOWN_MAGIC = "unknown_magic"  # magic not 0, 1 or 2 (stops)
CRC_MISMATCH = "crc_mismatch"  # checksum differs; the walk goes on with the next entry
INVALID_BATCH = "invalid_batch"  # framing fine, header contradicts itself; the walk goes on
RECORD_DECODE = "record_decode"  # records of a CRC-valid batch do not parse (records level only)
DECOMPRESSION = "decompression"  # codec unknown, stream corrupt, or over the size cap
UNKNOWN_FILE = "unknown_file"  # a file in a partition folder that Kafka does not write
TEMPORARY_FILE = "temporary_file"  # .deleted / .cleaned / .swap files, left for the broker to finish
UNREADABLE = "unreadable"  # the operating system refused to read it
CORRUPT_SIDECAR = "corrupt_sidecar"  # a snapshot, index or checkpoint file that does not parse

# Kinds after which the rest of a segment is not walked.
STOPS_FILE = frozenset({TRUNCATED, ZERO_FILLED, INVALID_LENGTH, UNKNOWN_MAGIC})


class KafkaFormatError(Exception):
    """Bytes that do not follow the Kafka format.

    ``kind`` is one of the error kinds above; ``position`` is the byte position in the file when
    known; ``bytes_affected`` the bytes this problem makes unusable (0 when the bytes are still
    accounted for by a parsed batch).
    """

    def __init__(self, kind: str, message: str, position: int | None = None, bytes_affected: int = 0):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.position = position
        self.bytes_affected = bytes_affected
