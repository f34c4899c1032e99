"""What ``kafka-dump-log.sh --files PATH`` prints for a ``.log`` segment or a KRaft ``.checkpoint``
snapshot, from the binary reader: :func:`dump_segment`."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from analytics.kafka.discovery import BOOTSTRAP_CHECKPOINT, KRAFT_SNAPSHOT
from analytics.kafka.dumplog.entries import entry_records
from analytics.kafka.dumplog.printer import RecordPrinter, batch_line
from analytics.kafka.dumplog.source import java_path
from analytics.kafka.dumplog.style import dump_style
from analytics.kafka.errors import STOPS_FILE
from analytics.kafka.fs import open_file
from analytics.kafka.logdir import read_segment
from analytics.kafka.reader import batches_from_arrow

_JAVA_LONG = re.compile(r"[+-]?\d+")


def dump_segment(
    path: str,
    *,
    deep: bool = True,
    print_data: bool = False,
    skip_record_metadata: bool = False,
    kafka_version: str | None = None,
) -> Iterator[str]:
    """The lines ``kafka-dump-log.sh --files PATH [--deep-iteration]`` prints, from the binary reader.

    Every entry the tool iterates gets its batch line, also one failing its CRC; with ``deep``
    its records follow, decoded whatever its CRC says, as the tool does (a legacy record prints
    its own message's CRC and validity). Where the records do not decode, the tool throws and
    stops; here the entry has no record lines and the dump goes on. A torn tail ends with the
    tool's ``Found N invalid bytes`` line. The options are those of
    :func:`~analytics.kafka.dumplog.printer.format_dump`.
    """
    printer = RecordPrinter(dump_style(kafka_version), print_data, skip_record_metadata)
    deep = deep or print_data
    shown = java_path(path)
    name = os.path.basename(shown)
    read = read_segment(path)
    yield f"Dumping {shown}"
    header = _segment_header(name)
    if header is not None:
        yield header
    batches = (b for rb in read.batches.to_batches() for b in batches_from_arrow(rb))
    if deep:
        with open_file(path) as source:
            for batch in batches:
                yield batch_line(batch)
                for record, valid, crc in entry_records(source, batch):
                    yield printer.record_line(batch, record, valid, crc)
    else:
        for batch in batches:
            yield batch_line(batch)
    invalid = sum(e.bytes_affected for e in read.errors if e.error_kind in STOPS_FILE)
    if invalid:
        yield f"Found {invalid} invalid bytes at the end of {name}"


def _segment_header(name: str) -> str | None:
    """The line after ``Dumping``: the segment's start offset, or a KRaft snapshot's id.

    >>> _segment_header("00000000000000000042.log")
    'Log starting offset: 42'
    >>> _segment_header("00000000000000000100-0000000003.checkpoint")
    'Snapshot end offset: 100, epoch: 3'
    """
    if name.endswith(".log"):
        first = name.split(".")[0]
        # Long.parseLong of the name before its first dot; a name that is no number makes the tool throw.
        return f"Log starting offset: {int(first) if _JAVA_LONG.fullmatch(first) else 0}"
    if name == BOOTSTRAP_CHECKPOINT:
        return "KRaft bootstrap snapshot"
    checkpoint = KRAFT_SNAPSHOT.fullmatch(name)
    if checkpoint is not None:
        return f"Snapshot end offset: {int(checkpoint['offset'])}, epoch: {int(checkpoint['epoch'])}"
    return None
