"""The audit's plan, made once before it writes anything (:class:`AuditPlan`).

What the audit reads, its configuration as resolved (:mod:`analytics.audit.settings`), its mode and
what it continues, and the session settings its steps run under:

- ``full``: every batch replayed (no audit in OUT to continue, or one of another configuration);
- ``continued``: the histories that continue from the audit in ``continued_out`` replay only their
  new batches (:mod:`analytics.audit.increment`), the earlier verdicts read and written again;
- ``linked``: every history continues and OUT is local: the earlier verdicts' files are kept as
  they are (hard links), and the derived tables add the new rows to the previous audit's.

A history longer than the configured ``range_batches`` is replayed in offset ranges; unset, the plan
sizes them from the memory of a task (:func:`range_decision`). A linked audit of few new batches (``FEW_BATCHES``, :mod:`analytics.tuning`) that needs no earlier
verdict again and few records runs its queries planned once each (``single_plan_conf``); the
derived tables too, unless replicas are compared. The decision is :func:`audit_decision`, a pure
function of a few numbers.

An audit is ``incremental`` when its caller asks it to be (``--incremental``, carried by the
export's plan: :class:`analytics.export_plan.ExportPlan`); what the request becomes is ``mode``,
decided here once.
"""

from __future__ import annotations

import json
import posixpath
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace

from analytics import reuse
from analytics.audit.config import AuditConfig
from analytics.audit.incarnations import described, deleted_incarnations, is_marked, with_deleted
from analytics.audit.settings import resolved
from analytics.contract import APART, AUDIT, EXPORT, SUMMARY, TOPIC_ID
from analytics.publish import continued, published, read_manifest
from analytics.spark import javacode
from analytics.spark.columns import deleted_key, topic_ids, with_live_topic_id, with_topic_id
from analytics.spark.session import default_parallelism, settings, single_plan_conf
from analytics.spark.tables import held, read_parquet
from analytics.tuning import DEFAULT_RANGE_BATCHES, FEW_BATCHES, MIB, RANGE_ROW_BYTES

# The replay holds its rows for the state tables (``analytics.audit.rules.replay``): held uncompressed,
# Spark's columnar cache costs half as much to build (4M batches: the window stage and the cache 13.0 s
# without holding, 27.5 s held compressed, 20.0 s held uncompressed; docs/benchmarks.md).
HELD_CONF = {"spark.sql.inMemoryColumnarStorage.compressed": "false"}

FULL = "full"
CONTINUED = "continued"
LINKED = "linked"


@dataclass(frozen=True)
class AuditPlan:
    """An audit of ``out``: ``config`` (resolved; ``provenance``: where each setting came from), the
    export's manifest and tables it reads, its ``mode``, the audit it continues (``continued_out``:
    None unless it was asked to be incremental; ``previous``) and what is left to replay (``since``, ``step``), the session settings of the
    replay and of the derived tables (``HELD_CONF`` alone or empty: Spark's own planning), and why;
    ``window_function``: histories in one range are replayed by segaudit's window function on
    Spark's public API (the session has segaudit's Java, :mod:`analytics.spark.javacode`), else by
    the window steps, with the same facts;
    ``replicas_with_replay``: the replicas are compared beside the replay, under its settings (they
    read the export alone), not after it under the derived tables' (those of a replay planned once
    and derived tables planned by Spark: the replicas compared by Spark's planning)."""

    out: str
    config: AuditConfig
    provenance: dict
    export_manifest: dict
    batches: object
    log_starts: object
    records: object | None
    mode: str = FULL
    continued_out: str | None = None
    previous: object | None = None
    since: object | None = None
    step: object | None = None
    replay_conf: dict = field(default_factory=dict)
    derived_conf: dict = field(default_factory=dict)
    reason: str = "a full audit"
    window_function: bool = False
    replicas_with_replay: bool = True
    unread: object | None = None  # (log_dir, topic, partition, unread_files): segments not read; None: all were
    topic_ids: object | None = None  # (_folder, topic_id) of the partition folders (spark.columns.topic_ids)
    identity: dict | None = None  # the partition folders and those without a topic id (folder_identity)
    kept_apart: dict = field(default_factory=dict)  # leftover folder -> its key's id inside the audit (apart)
    range_sized: bool = False  # range_batches not given: sized here from a task's memory (range_decision)

    @property
    def linked(self) -> bool:
        return self.mode == LINKED

    @property
    def adds(self) -> bool:
        """Linked beside an audit that kept its per-file rows: the derived tables that compose (the
        per-file rows, anomalies, transactions, counts) add the new batches' to the previous audit's."""
        files = self.previous.producer_files if self.linked else None
        return files is not None and "last_state" in files.columns


def audit_plan(spark, out: str, config: AuditConfig, *, incremental: bool = False, progress=None) -> AuditPlan:
    """The plan of auditing the export in ``out`` under ``config``; ``incremental``: continue the audit
    published in ``out`` (or, for a ``segaudit run``'s folder, in the OUT it is published to:
    :func:`analytics.publish.continued`). ``progress`` hears why an incremental audit is a full one."""
    from analytics.audit.increment import increment, read_since
    from analytics.audit.replicas import held_in_several

    from analytics.spark.memory import task_memory

    store = published(out)
    manifest = read_manifest(out, EXPORT)
    config, provenance = resolved(store, config)  # the data dir's and server.properties' settings
    sized = config.range_batches is None
    if sized:  # not set: as long as a task's memory holds
        config = replace(config, range_batches=range_decision(task_memory(spark))[0])
    folders = folder_topic_ids(store, manifest)
    deleted = deleted_incarnations(folders, manifest.get("cluster_metadata"))
    folders = with_deleted(folders, deleted)
    ids = topic_ids(spark, folders)
    written = read_parquet(spark, store.path("batches"))
    batches = held(left_out(with_topic_id(written, ids), config), store.size("batches"))  # read many times
    log_starts = left_out(with_live_topic_id(read_parquet(spark, store.path("log_start_offsets")), ids), config)
    records = (held(left_out(with_topic_id(read_parquet(spark, store.path("records")), ids), config),
                    store.size("records")) if store.is_dir("records") else None)
    inputs = dict(out=out, config=config, range_sized=sized, provenance=provenance, export_manifest=manifest,
                  batches=batches, log_starts=log_starts, records=records, window_function=javacode.load(spark),
                  unread=unread_segments(spark, store, manifest), topic_ids=ids,
                  identity=folder_identity(manifest, folders, deleted, config.skip_deleted_topics),
                  kept_apart={f: i for f, i in (folders or {}).items() if APART in (i or "")})
    continued_out = continued(out) if incremental else None
    previous, why = (None, None) if continued_out is None else previous_audit(spark, continued_out, config)
    earlier = previous.summary.get("topic_identity") or {} if previous is not None else {}
    if previous is not None and (any(not is_marked(i) for i in inputs["kept_apart"].values())
                                 or earlier.get("leftovers_apart") or earlier.get("deleted_incarnations")):
        # its state tables show a leftover's histories under the id alone, not under the audit's key (a
        # deleted incarnation new in this export is a new history: its key is in no state table yet)
        previous, why = None, ("the previous audit held a deleted topic's folders: a full audit"
                               if earlier.get("deleted_incarnations") and not earlier.get("leftovers_apart")
                               else "a leftover folder beside a live one of the same topic id: a full audit")
    if previous is None:
        if why:
            (progress or (lambda _msg: None))(why)
        return AuditPlan(**inputs, replay_conf=HELD_CONF, reason=why or "a full audit")
    since = read_since(spark, store.path("batches"), written.schema, manifest.get("segment_files") or {},
                       manifest["run_id"], previous.file_state, ids)
    few = single_plan_conf(default_parallelism(spark)) if few_batches(since and since.batches) else {}
    with settings(spark, few) if few else nullcontext():  # the survey reads only the new batches
        step = increment(batches, log_starts, previous, since)
    can_link = step.every and reuse.can_link(continued_out)
    look_back = step.prior.look_back
    record_rows = (reuse.parquet_rows(store.path("records")) if records is not None and can_link and not look_back
                   else None)
    mode, replay_single, derived_single, reason = audit_decision(
        continuing=True, since_batches=since and since.batches, every=step.every, can_link=can_link,
        look_back=look_back, record_rows=record_rows,
        replicated=held_in_several(manifest.get("segment_files") or {}))
    return AuditPlan(**inputs, mode=mode, continued_out=continued_out, previous=previous, since=since, step=step,
                     replay_conf=HELD_CONF | (few if replay_single else {}),
                     derived_conf=HELD_CONF | few if derived_single else {},
                     replicas_with_replay=derived_single or not replay_single, reason=reason)


def left_out(df, config: AuditConfig):
    """``df`` without the rows of deleted incarnations when the configuration skips them
    (``skip_deleted_topics``, :mod:`analytics.audit.incarnations`)."""
    return df.where(~deleted_key()) if config.skip_deleted_topics else df


def few_batches(batches: int | None) -> bool:
    """Whether ``batches`` new batches (None: unknown, every file scanned) are few enough to plan
    each query once."""
    return batches is not None and batches <= FEW_BATCHES


def range_decision(task_bytes: int | None) -> tuple[int, str]:
    """The batches of a range (:mod:`analytics.audit.ranges`) when the configuration does not set them,
    and why: what ``task_bytes`` of execution memory a task holds at ``RANGE_ROW_BYTES`` a batch, never
    fewer than ``DEFAULT_RANGE_BATCHES``, which is also the size when the memory is unknown (None).

    >>> range_decision(None)
    (250000, 'the memory of a task unknown: ranges of 250,000 batches')
    >>> range_decision(3_600_000_000)
    (3515625, '3,433 MiB a task: ranges of 3,515,625 batches')
    >>> range_decision(200_000_000)[0]
    250000
    """
    if task_bytes is None:
        return DEFAULT_RANGE_BATCHES, f"the memory of a task unknown: ranges of {DEFAULT_RANGE_BATCHES:,} batches"
    size = max(DEFAULT_RANGE_BATCHES, task_bytes // RANGE_ROW_BYTES)
    return size, f"{task_bytes // MIB:,} MiB a task: ranges of {size:,} batches"


def audit_decision(*, continuing: bool, since_batches: int | None = None, every: bool = False,
                   can_link: bool = False, look_back: bool = False, record_rows: int | None = None,
                   replicated: bool = False) -> tuple[str, bool, bool, str]:
    """The mode of an audit, whether its replay and its derived tables run planned once each, and why.

    ``continuing``: an audit in OUT to continue; ``since_batches``: the batches read since it (None:
    unknown); ``every``: every history it audited continues; ``can_link``: its files can be kept as
    they are (``every`` and a local OUT); ``look_back``: a new batch may repeat an earlier one (the
    earlier verdicts are read again); ``record_rows``: the records (read whole); ``replicated``: a
    partition exported from several log dirs (the replicas' batches are compared).

    >>> audit_decision(continuing=False)
    ('full', False, False, 'a full audit')
    >>> audit_decision(continuing=True, since_batches=10, every=True, can_link=True)[:3]
    ('linked', True, True)
    """
    if not continuing:
        return FULL, False, False, "a full audit"
    mode = LINKED if can_link else CONTINUED
    what = ("every history continues: the earlier verdicts' files kept" if mode == LINKED
            else "the continued histories' new batches replayed, the earlier verdicts written again")
    if not few_batches(since_batches):
        why = "new batches unknown" if since_batches is None else f"{since_batches:,} new batches"
        return mode, False, False, f"{what}; {why}: Spark's own planning"
    if mode != LINKED or look_back:
        return mode, False, False, f"{what}; the whole log is read: Spark's own planning"
    if record_rows is not None and record_rows > FEW_BATCHES:
        return mode, False, False, f"{what}; {record_rows:,} records: Spark's own planning"
    if replicated:
        return mode, True, False, f"{what}; {since_batches:,} new batches: planned once, the replicas compared by Spark's planning"
    return mode, True, True, f"{what}; {since_batches:,} new batches: each query planned once"


def previous_audit(spark, out: str, config: AuditConfig):
    """The audit in OUT that an incremental audit continues (:class:`~analytics.audit.increment.Previous`)
    and None, or None and why the audit is a full one: there is none, it lacks the state tables, or its
    configuration differs."""
    from analytics.audit.increment import Previous
    from analytics.errors import StageMissing

    store = published(out)
    try:
        manifest = read_manifest(out, AUDIT)
        summary = json.loads(store.read_text(SUMMARY))
    except (StageMissing, FileNotFoundError, ValueError):
        return None, "no complete audit in OUT to continue: a full audit"
    if not all(store.is_dir(t) for t in ("batch_verdicts", "producer_state", "partition_state")):
        return None, "the audit in OUT has no producer state: a full audit"
    tables = {t: read_parquet(spark, store.path(t)) if store.is_dir(t) else None
              for t in ("batch_verdicts", "producer_state", "partition_state", "producer_files", "file_state")}
    if any(t is not None and TOPIC_ID not in t.columns for t in tables.values()):
        return None, "the audit in OUT keys its histories by topic name alone: a full audit"
    tables = {name: None if t is None else with_topic_id(t) for name, t in tables.items()}
    before = dict(summary.get("configuration") or {})
    now = configuration(config) | {"producer_id_expiration_ms": config.expiration_ms}
    if _verdict_settings(before) != _verdict_settings(now):
        return None, "the audit in OUT was made with another configuration: a full audit"
    local = reuse.can_link(out)  # footers read with pyarrow: a local OUT (an incremental audit's)
    return Previous(manifest["run_id"], tables["batch_verdicts"], tables["producer_state"], tables["partition_state"],
                    summary, tables["producer_files"], tables["file_state"],
                    *((reuse.parquet_rows(store.path(t)) if local else None)
                      for t in ("partition_state", "producer_state"))), None


def _verdict_settings(configuration: dict) -> dict:
    """The configuration a verdict depends on: not the export time (transactions only) nor the ranges."""
    return {k: v for k, v in configuration.items() if k not in ("export_time_ms", "range_batches")}


def unread_segments(spark, store, manifest: dict):
    """``(log_dir, topic, partition, unread_files)`` of the partitions holding segment files the export
    could not read (``parse_errors`` of the ``NOT_READ`` kinds); None when its coverage says it read
    every file (or an older export records no coverage), without reading a table."""
    from pyspark.sql import functions as F

    from analytics.contract import NOT_READ
    from analytics.spark.columns import with_log_dir

    if not (manifest.get("coverage") or {}).get("not_read"):
        return None
    errors = read_parquet(spark, store.path("parse_errors"))
    segments = errors.where(F.col("error_kind").isin(*NOT_READ) & F.col("file").endswith(".log"))
    return (with_log_dir(segments).groupBy("log_dir", "topic", "partition")
            .agg(F.countDistinct("file").alias("unread_files")))


def folder_topic_ids(store, manifest: dict) -> dict[str, str | None] | None:
    """Each partition folder's topic id, from the export's ``partition_metadata`` (a row per folder's
    ``partition.metadata``, None for a file that gave none), read once with pyarrow: the audit joins it
    to several tables, which would each read its files again. A leftover folder beside another of the
    same id in its log dir is kept apart (:func:`apart`). None: an export without the table, or one
    that did not record each file, and no leftover to keep apart."""
    from analytics.kafka import sinks

    folders: dict[str, str | None] = {}
    if store.is_dir("partition_metadata"):
        for part in sinks.parquet_files(store.path("partition_metadata")):
            table = sinks.read_table(part)
            if "file" not in table.column_names:
                folders = {}
                break
            for row in table.select(["file", TOPIC_ID]).to_pylist():
                if row["file"] is not None:
                    folders.setdefault(posixpath.dirname(row["file"]), row[TOPIC_ID])
    segment_folders = {posixpath.dirname(path) for path in (manifest.get("segment_files") or {})}
    kept_apart = apart({f: folders.get(f) for f in segment_folders | set(folders)})
    return (folders | kept_apart) or None


def apart(folders: dict[str, str | None]) -> dict[str, str]:
    """The leftover folders (``-delete``, ``-stray``) whose log dir holds another folder of the same
    topic-partition and topic id, each with its own key inside the audit: the id, ``APART`` and the
    folder's suffix. A replica moved away from a broker and back before it deleted the old copy leaves
    ``t-0`` and ``t-0.<uid>-delete`` side by side with one id; replayed as one history, every batch
    of the old copy would repeat one of the live log's.

    >>> apart({"/d/t-0": "X", "/d/t-0.9fcb5b7f1ba24c1a8d5d8ebae6cafb6b-delete": "X", "/e/t-0.ab-delete": "X"})
    {'/d/t-0.9fcb5b7f1ba24c1a8d5d8ebae6cafb6b-delete': 'X@9fcb5b7f1ba24c1a8d5d8ebae6cafb6b-delete'}
    """
    from analytics.kafka.discovery import LEFTOVER_SUFFIXES, parse_partition_dir

    groups: dict[tuple, list[tuple[str, str | None]]] = {}
    for folder, topic_id in folders.items():
        parsed = parse_partition_dir(posixpath.basename(folder))
        if parsed is not None:
            topic, partition, suffix = parsed
            groups.setdefault((posixpath.dirname(folder), topic, partition, topic_id or ""), []).append(
                (folder, suffix))
    return {folder: f"{key[3]}{APART}{posixpath.basename(folder).rpartition('.')[2]}"
            for key, members in groups.items() if len(members) > 1
            for folder, suffix in members if suffix in LEFTOVER_SUFFIXES}


def folder_identity(manifest: dict, folders: dict[str, str | None] | None, deleted: dict | None = None,
                    skipped: bool = False) -> dict | None:
    """``{"partition_folders": n, "without_topic_id": m, "leftovers_apart": k}``: the partition folders
    holding the export's segment files, those whose ``partition.metadata`` gave no topic id (brokers
    before 2.8, hand-copied segments, a file lost): their histories are told apart by topic name
    alone, and the leftover folders kept apart from a live folder of the same id (:func:`apart`). A
    live cluster's export counts its captured partitions, and those the Metadata API gave no topic id
    (a broker before 2.8), with ``"source": "metadata_api"``. None when the export names no segment files (``kafka-dump-log`` text).
    ``folders``: :func:`folder_topic_ids`; ``deleted``: the deleted incarnations
    (:func:`analytics.audit.incarnations.deleted_incarnations`), recorded as ``deleted_incarnations``
    with ``deleted_skipped`` (``skip_deleted_topics``: left out of the audit)."""
    live = (manifest.get("cluster") or {}).get("partitions")
    if live is not None:
        return {"partition_folders": len(live), "without_topic_id": sum(not p.get(TOPIC_ID) for p in live),
                "source": "metadata_api"}
    segment_folders = {posixpath.dirname(path) for path in (manifest.get("segment_files") or {})}
    if not segment_folders:
        return None
    ids = {folder: (topic_id or "").partition(APART)[0] for folder, topic_id in (folders or {}).items()}
    identity = {"partition_folders": len(segment_folders),
                "without_topic_id": len(segment_folders - {folder for folder, i in ids.items() if i})}
    kept_apart = sum(APART in (topic_id or "") and not is_marked(topic_id)
                     for folder, topic_id in (folders or {}).items() if folder in segment_folders)
    gone = ({"deleted_incarnations": deleted, "deleted_skipped": skipped} if deleted else {})
    return identity | ({"leftovers_apart": kept_apart} if kept_apart else {}) | gone


def described_identity(identity: dict | None) -> str | None:
    """One line for an operator when some partition folder has no topic id or a leftover folder was
    kept apart, else None.

    >>> described_identity({"partition_folders": 3, "without_topic_id": 1})
    '1 of 3 partition folders has no topic id (no partition.metadata: a broker before 2.8, or copied segments): a topic deleted and recreated under its name cannot be told apart there'
    >>> described_identity({"partition_folders": 3, "without_topic_id": 0, "leftovers_apart": 1})
    "1 leftover folder (-delete, -stray) beside a live folder of the same topic id in its log dir: audited as a history of its own (the broker's old copy of a replica that moved away and back)"
    >>> described_identity({"partition_folders": 4, "without_topic_id": 4, "source": "metadata_api"})[:75]
    '4 of 4 partitions have no topic id (the Metadata API gave none: a broker be'
    >>> described_identity({"partition_folders": 3, "without_topic_id": 0}) is None
    True
    """
    if not identity:
        return None
    lines = []
    n = identity["without_topic_id"]
    if n and identity.get("source") == "metadata_api":
        lines.append(f"{n:,} of {identity['partition_folders']:,} partitions {'has' if n == 1 else 'have'} no topic id "
                     "(the Metadata API gave none: a broker before 2.8): a topic deleted and recreated under its "
                     "name cannot be told apart there")
    elif n:
        lines.append(f"{n:,} of {identity['partition_folders']:,} partition folders {'has' if n == 1 else 'have'} no "
                     "topic id (no partition.metadata: a broker before 2.8, or copied segments): a topic deleted "
                     "and recreated under its name cannot be told apart there")
    if identity.get("leftovers_apart"):
        n = identity["leftovers_apart"]
        lines.append(f"{n:,} leftover folder{'' if n == 1 else 's'} (-delete, -stray) beside a live folder of the "
                     f"same topic id in {'its' if n == 1 else 'their'} log dir: audited as "
                     f"{'a history of its own' if n == 1 else 'histories of their own'} (the broker's old copy "
                     "of a replica that moved away and back)")
    if identity.get("deleted_incarnations"):
        lines.append(described(identity["deleted_incarnations"], identity.get("deleted_skipped", False)))
    return "; ".join(lines) or None


def configuration(config: AuditConfig) -> dict:
    """The settings of ``config`` as ``summary.json`` records them (not who gave them: ``settings``)."""
    return _jsonable({k: v for k, v in asdict(config).items() if k != "given"})


def _jsonable(value):
    if isinstance(value, dict):
        return {(":".join(map(str, k)) if isinstance(k, tuple) else k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
