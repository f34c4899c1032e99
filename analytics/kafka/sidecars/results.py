"""How the sidecar readers report and the writers take their entries.

A reader meets a whole-file problem as a :class:`~analytics.kafka.errors.KafkaFormatError` of
kind ``corrupt_sidecar`` and returns it as one ``ParseError`` row; a writer takes row dataclasses
or plain tuples of their on-disk values.
"""

from __future__ import annotations

from analytics.kafka.errors import CORRUPT_SIDECAR, KafkaFormatError
from analytics.kafka.model import ParseError


def corrupt(message: str, position: int, size: int) -> KafkaFormatError:
    # Every whole-file problem makes the whole file untrusted, so all its bytes are affected.
    return KafkaFormatError(CORRUPT_SIDECAR, message, position, size)


def error_row(topic: str, partition: int, file: str, exc: KafkaFormatError) -> ParseError:
    return ParseError(topic, partition, file, exc.position, exc.kind, exc.message, exc.bytes_affected)


def entry_values(entry, row_type: type, names: tuple[str, ...]) -> tuple:
    """The on-disk values of an entry given as a ``row_type`` row (its fields ``names``) or a tuple."""
    if isinstance(entry, row_type):
        return tuple(getattr(entry, name) for name in names)
    return tuple(entry)
