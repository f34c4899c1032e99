"""The reader's one domain error; the names of the problems it reports come from the contract.

Inside the reader a problem is raised as :class:`KafkaFormatError`; at the boundary of a file
every problem becomes a :class:`~analytics.kafka.model.ParseError` row, so bad bytes are data,
never a crash.
"""

from __future__ import annotations

# The error_kind values of parse_errors rows are part of the contract: named there, once.
from analytics.contract.vocabulary import (  # noqa: F401 - re-exported for the reader's modules
    CORRUPT_SIDECAR,
    CRC_MISMATCH,
    DECOMPRESSION,
    INVALID_BATCH,
    INVALID_LENGTH,
    RECORD_DECODE,
    STOPS_FILE,
    TEMPORARY_FILE,
    TRUNCATED,
    UNKNOWN_FILE,
    UNKNOWN_MAGIC,
    UNREADABLE,
    VANISHED,
    ZERO_FILLED,
)


def not_read(exc: OSError, what: str = "cannot open") -> tuple[str, str]:
    """The error kind and message of a file that could not be read: gone since it was listed
    (``vanished``: deleted while the export ran), or refused (``unreadable``: permissions, I/O)."""
    if isinstance(exc, FileNotFoundError):
        return VANISHED, "listed, then gone when read: deleted while the export ran"
    return UNREADABLE, f"{what}: {exc.strerror or exc}"


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
