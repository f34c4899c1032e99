"""``OUT/cluster_configs``: the topic and broker configs a data dir's KRaft metadata log holds.

Each log dir with a ``__cluster_metadata-0`` folder gives the configs in force at the end of its
metadata log (:class:`analytics.kafka.metadata.ClusterConfigs`): the newest snapshot
(``<end offset>-<epoch>.checkpoint``) that reads without an error, then the log's records from its
end offset on; without one, the log from its start. Read on the driver, whole, at every export
(the metadata log is small: a snapshot and the records since), so an incremental export's table
is a full one's.
"""

from __future__ import annotations

from pathlib import Path

from analytics.contract.vocabulary import log_dir_of
from analytics.kafka.discovery import discover
from analytics.kafka.fs import RemotePath, is_remote
from analytics.kafka.logdir import read_segment
from analytics.kafka.metadata import METADATA_TOPIC, ClusterConfigs, apply_records, node_id_of, snapshot_offset

META_PROPERTIES = "meta.properties"


def cluster_configs(paths: list[str]) -> tuple[list[dict], list, dict]:
    """The ``cluster_configs`` rows of the metadata logs under ``paths``, the parse errors of records
    that do not decode, and what was read per log dir (for the manifest)."""
    rows: list[dict] = []
    errors: list = []
    read: dict = {}
    for path in paths:
        try:
            log_dirs = discover(path)
        except OSError:
            continue  # the export reports unreadable inputs
        for log_dir in log_dirs:
            for part in log_dir.partitions:
                if part.topic != METADATA_TOPIC or part.suffix is not None or not part.segments:
                    continue
                state, note, errs = _read_partition(part)
                where = log_dir_of(str(part.segments[0].path))
                rows += state.rows(where, _node_id(log_dir.path))
                errors += errs
                read[where] = note
    return rows, errors, read


def _read_partition(part) -> tuple[ClusterConfigs, dict, list]:
    """The configs of one ``__cluster_metadata-0`` folder, what was read, and the record errors."""
    snapshots = sorted(((snapshot_offset(p.name), p) for p in part.ignored if snapshot_offset(p.name) is not None),
                       key=lambda s: s[0], reverse=True)
    state, since, used = ClusterConfigs(), 0, None
    for end, path in snapshots:
        read = read_segment(path, records=True, topic=METADATA_TOPIC, partition=part.partition)
        candidate = ClusterConfigs()
        if read.errors or apply_records(candidate, read.records, str(path), partition=part.partition):
            continue  # a snapshot that does not read whole: an older one, or the log from its start
        state, since, used = candidate, end, path.name
        break
    errors: list = []
    for segment in part.segments:
        read = read_segment(segment.path, records=True, topic=METADATA_TOPIC, partition=part.partition)
        if read.records.num_rows and max(read.records.column("offset").to_pylist()) < since:
            continue
        errors += apply_records(state, read.records, str(segment.path), partition=part.partition, since=since)
    state.end_offset = max(state.end_offset, since)
    note = {"snapshot": used, "end_offset": state.end_offset, "records": state.records, "skipped": state.skipped,
            "undecoded": len(errors), "configs": len(state.configs), "topic_ids": state.topic_ids()}
    return state, note, errors


def _node_id(log_dir) -> int | None:
    """The node id the log dir's ``meta.properties`` names, or None."""
    try:
        if is_remote(str(log_dir)):
            text = RemotePath(f"{str(log_dir).rstrip('/')}/{META_PROPERTIES}").read_bytes().decode()
        else:
            text = (Path(log_dir) / META_PROPERTIES).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    return node_id_of(text)
