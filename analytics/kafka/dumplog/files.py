"""What ``kafka-dump-log.sh --files PATH`` prints for any file: :func:`dump_file` picks the
printer by the file's suffix, as the tool does."""

from __future__ import annotations

import os
from collections.abc import Iterator

from analytics.kafka.dumplog.segment import dump_segment
from analytics.kafka.dumplog.sidecars import dump_producer_snapshot, dump_txn_index
from analytics.kafka.dumplog.source import BATCH_FILE_SUFFIXES, java_path
from analytics.kafka.sidecars.snapshot import SNAPSHOT_SUFFIX
from analytics.kafka.sidecars.txnindex import TXNINDEX_SUFFIX


def dump_file(
    path: str,
    *,
    deep: bool = True,
    print_data: bool = False,
    skip_record_metadata: bool = False,
    kafka_version: str | None = None,
    warn=None,
) -> Iterator[str]:
    """The stdout lines of DumpLogSegments for one file, chosen by its suffix as the tool does.

    ``.log`` segments and ``.checkpoint`` KRaft snapshots: :func:`dump_segment`; ``.snapshot``:
    :func:`dump_producer_snapshot`; ``.txnindex``: :func:`dump_txn_index`. ``warn`` (a callable
    taking one line) receives what the tool prints on stderr instead of stdout: an unknown file,
    a snapshot the broker would refuse. ``.index`` and ``.timeindex`` files raise ValueError.
    """
    name = os.path.basename(java_path(path))
    suffix = name[name.rfind(".") :] if "." in name else ""
    if suffix in BATCH_FILE_SUFFIXES:
        yield from dump_segment(
            path,
            deep=deep,
            print_data=print_data,
            skip_record_metadata=skip_record_metadata,
            kafka_version=kafka_version,
        )
    elif suffix == SNAPSHOT_SUFFIX:
        yield from dump_producer_snapshot(path, kafka_version=kafka_version, warn=warn)
    elif suffix == TXNINDEX_SUFFIX:
        yield from dump_txn_index(path, warn=warn)
    elif suffix in (".index", ".timeindex"):
        raise ValueError(f"{path}: segaudit dump-log does not print {suffix} files")
    else:
        yield f"Dumping {java_path(path)}"
        if warn is not None:
            warn(f"Ignoring unknown file {java_path(path)}")
