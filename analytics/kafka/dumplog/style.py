"""What the ``kafka-dump-log.sh`` of each Kafka release prints differently: :func:`dump_style`.

The releases where the text changed, checked against the real tools of 3.9.2 and 4.3.1 by
``tests/test_dumplog_oracle.py``, are the constants below; the printers take a
:class:`DumpStyle` and never look at a version themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OLDEST_KAFKA_VERSION = (3, 2)  # batch lines print deleteHorizonMs; older layouts are only read
OPTIONAL_LONG_SINCE = (3, 5)  # snapshot lines: currentTxnFirstOffset an OptionalLong, before None / Some(n)
JAVA_TOOL_SINCE = (4, 3)  # org.apache.kafka.tools.DumpLogSegments, the Java port of kafka.tools' Scala tool
# The default: the Scala tool's text, printed by every release from 3.5 to 4.2.
DEFAULT_KAFKA_VERSION = "4.2"

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.\d+)*(?:-[\w.]+)?")


@dataclass(frozen=True, slots=True)
class DumpStyle:
    """What the DumpLogSegments of one Kafka release prints differently from the others.

    ``java_tool`` (4.3+): legacy record lines end ``crc: C`` without the Scala tool's stray ``}``;
    LEADER_CHANGE records print ``LeaderChange: {json}`` instead of ``controlType: LEADER_CHANGE(2)``;
    with ``--skip-record-metadata`` a record without key prints ``| payload: P`` (the Scala tool
    `` payload: P``); a snapshot entry without a batch has no trailing space.
    ``optional_long`` (3.5+): a snapshot's ``currentTxnFirstOffset`` is ``OptionalLong.empty`` /
    ``OptionalLong[n]``, before ``None`` / ``Some(n)``.
    """

    java_tool: bool
    optional_long: bool


def dump_style(kafka_version: str | None = None) -> DumpStyle:
    """The text of the ``kafka-dump-log.sh`` of ``kafka_version`` (``MAJOR.MINOR[.PATCH]``, 3.2 or later).

    >>> dump_style("4.4.0"), dump_style("3.9.2") == dump_style()
    (DumpStyle(java_tool=True, optional_long=True), True)
    >>> dump_style("2.8")
    Traceback (most recent call last):
    ...
    ValueError: segaudit prints the dump-log text of Kafka 3.2 and later, not 2.8
    """
    text = DEFAULT_KAFKA_VERSION if kafka_version is None else kafka_version.strip()
    match = _VERSION.fullmatch(text)
    if match is None:
        raise ValueError(f"not a Kafka version: {text!r} (expected MAJOR.MINOR or MAJOR.MINOR.PATCH)")
    version = (int(match.group(1)), int(match.group(2)))
    if version < OLDEST_KAFKA_VERSION:
        raise ValueError(f"segaudit prints the dump-log text of Kafka 3.2 and later, not {text}")
    return DumpStyle(java_tool=version >= JAVA_TOOL_SINCE, optional_long=version >= OPTIONAL_LONG_SINCE)
