"""Readers and byte-exact writers for the files Kafka keeps beside its log segments.

A partition folder holds producer-state snapshots (``<offset>.snapshot``,
:mod:`~analytics.kafka.sidecars.snapshot`), transaction indexes (``<offset>.txnindex``,
:mod:`~analytics.kafka.sidecars.txnindex`), a ``leader-epoch-checkpoint``
(:mod:`~analytics.kafka.sidecars.checkpoints`) and a ``partition.metadata``
(:mod:`~analytics.kafka.sidecars.metadata`); a log dir holds the four offset checkpoints
(``log-start-offset-checkpoint`` and its kin, :mod:`~analytics.kafka.sidecars.checkpoints`). Each
reader takes the file's bytes and returns a :class:`~analytics.kafka.model.SidecarResult`: a file
that does not parse becomes ``corrupt_sidecar`` rows, never an exception. Each writer returns the
bytes the broker writes for the same content, so tests and generated log directories are real
Kafka files. :func:`read_sidecar` reads one file from disk with the reader its name calls for.

Where the broker tolerates something (an empty checkpoint file, a partial trailing ``.txnindex``
entry) the reader follows the broker's reading, and says so where it does.
"""

from analytics.kafka.sidecars.checkpoints import (
    CHECKPOINT_FILES,
    LOG_DIR_PARTITION,
    LOG_DIR_TOPIC,
    read_leader_epoch_checkpoint,
    read_offset_checkpoint,
    write_leader_epoch_checkpoint,
    write_offset_checkpoint,
)
from analytics.kafka.sidecars.files import read_sidecar
from analytics.kafka.sidecars.metadata import ZERO_TOPIC_ID, read_partition_metadata, write_partition_metadata
from analytics.kafka.sidecars.snapshot import (
    empty_snapshot_marker,
    is_snapshot_entry,
    read_snapshot,
    snapshot_offset_from_name,
    write_snapshot,
)
from analytics.kafka.sidecars.txnindex import read_txnindex, write_txnindex

__all__ = [
    "CHECKPOINT_FILES",
    "LOG_DIR_PARTITION",
    "LOG_DIR_TOPIC",
    "ZERO_TOPIC_ID",
    "empty_snapshot_marker",
    "is_snapshot_entry",
    "read_leader_epoch_checkpoint",
    "read_offset_checkpoint",
    "read_partition_metadata",
    "read_sidecar",
    "read_snapshot",
    "read_txnindex",
    "snapshot_offset_from_name",
    "write_leader_epoch_checkpoint",
    "write_offset_checkpoint",
    "write_partition_metadata",
    "write_snapshot",
    "write_txnindex",
]
