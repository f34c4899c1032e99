"""``kafka-dump-log.sh`` text, both ways.

As an input, :func:`parse_dump` reads the text of every Kafka version into the rows the binary
reader gives (``Batch``, :class:`DumpRecord`, ``ParseError``): :mod:`.tokens` reads a line's
``name: value`` tokens, :mod:`.rows` turns lines into rows, :mod:`.parse` follows the dump from
line to line.

As an output, :func:`dump_file` prints what the tool of a release (3.2+, :func:`dump_style`,
:mod:`.style`) prints for a ``.log``, ``.checkpoint``, ``.snapshot`` or ``.txnindex`` file, from
the binary readers: :mod:`.segment` (with :mod:`.entries` for the records of deep iteration),
:mod:`.sidecars`, and :mod:`.printer` (with :mod:`.kraft` for KRaft control records) for the
batch and record lines, which :func:`format_dump` also prints for rows already read.
``tests/test_dumplog_oracle.py`` checks the text line for line against the real 3.9.2 and 4.3
tools (docs/real-broker.md).
"""

from analytics.kafka.dumplog.files import dump_file
from analytics.kafka.dumplog.parse import DUMP_LINE, DumpItem, parse_dump
from analytics.kafka.dumplog.printer import format_dump
from analytics.kafka.dumplog.rows import DumpRecord
from analytics.kafka.dumplog.segment import dump_segment
from analytics.kafka.dumplog.sidecars import dump_producer_snapshot, dump_txn_index
from analytics.kafka.dumplog.style import DumpStyle, dump_style

__all__ = [
    "DUMP_LINE",
    "DumpItem",
    "DumpRecord",
    "DumpStyle",
    "dump_file",
    "dump_producer_snapshot",
    "dump_segment",
    "dump_style",
    "dump_txn_index",
    "format_dump",
    "parse_dump",
]
