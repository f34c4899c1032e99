"""Every published table as a Delta Lake table at ``OUT/<table>``: the form other engines open.

The run commit (:mod:`analytics.publish.commits`) stays what segaudit reads and what orders runs.
After a commit, each table of a stage it changed becomes a new version of the Delta table at
``OUT/<table>`` (Parquet files plus ``_delta_log/``), committed with ``deltalake`` (delta-rs, no JVM;
on S3 a conditional put): the run's Parquet files are placed under ``OUT/<table>/<run>/`` (hard links
on a local disk, server-side copies in a bucket) and one Delta commit replaces the table's files with
them. So DuckDB's ``delta_scan``, Spark's ``format("delta")``, ``deltalake``, polars and Trino open
``OUT/<table>`` as it is, with time travel, and know nothing of segaudit.

Each Delta commit carries the run commit's version as Delta's application transaction
(``txn``, app id ``segaudit``): a Delta table is up to date when that version is at least the version
its stage was last committed at. Two processes that publish the same table commit in turn and never
move it back to an older run (a commit finds the table newer and stops). A process killed between
the run commit and its Delta commits leaves the tables one run behind, never half-written (each Delta
commit is atomic); the next command that writes ``OUT`` brings them up to date (:func:`publish` on
open). There is no commit across tables: the run commit is the one that ties a run's tables together.

The files under ``OUT/<table>/<run>/`` go when the run folder does (retention,
:func:`analytics.publish.commits.collect`), so a Delta version reads for as long as segaudit's own
version does.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote

from analytics.contract.schemas import OUT_SCHEMAS
from analytics.contract.vocabulary import TABLES

APP_ID = "segaudit"  # Delta's application id of segaudit's commits: its version is the run commit's
TRIES = 8  # Delta commits of one table tried before giving up (another process commits it meanwhile)
_THREADS = 8  # files placed (linked, or copied in a bucket) at once
# The tables written in Hive-style folders (``topic=<name>/``): a Delta table's partition columns, which
# it keeps for good (an empty table is created with them too).
PARTITIONED = {"batches": ("topic",), "records": ("topic",), "batch_verdicts": ("topic",)}


class DeltaLag(Exception):
    """A Delta table could not be brought up to date; the run commit stands and a later one retries."""


def stale(store, snapshot, outputs: Mapping[str, Iterable[str]]) -> list[tuple]:
    """The tables of ``snapshot`` whose Delta table is behind it: (table, its folder relative to ``OUT``,
    the version its stage was committed at, its Delta table as read or None). A table its stage no
    longer wrote (``export`` without ``--records`` after a run with them) has no folder: its Delta
    table, where there is one, is emptied.
    ``outputs``: what each stage owns (:data:`analytics.publish.commits.OUTPUTS`)."""
    wanted = []
    for stage, entry in snapshot.stages.items():
        if not entry.get("root"):
            continue
        version = int(entry.get("version") or snapshot.version)
        wanted += [(name, posixpath.join(entry["root"], name) if name in entry["outputs"] else None, version)
                   for name in outputs.get(stage, ()) if name in TABLES]
    behind = []
    for name, source, version in wanted:
        table = _open(store, name)
        current = -1 if table is None else (table.transaction_version(APP_ID) or -1)
        if current < version and (source is not None or current >= 0):
            behind.append((name, source, version, table))
    return behind


def publish(store, snapshot, outputs: Mapping[str, Iterable[str]]) -> None:
    """Bring every Delta table of ``OUT`` up to ``snapshot`` (those behind it only); :class:`DeltaLag`
    names the tables that could not be."""
    if snapshot.version == 0 or inner(store):
        return
    failed = []
    for name, source, version, table in stale(store, snapshot, outputs):
        try:
            _commit(store, name, source, version, table)
        except DeltaLag as exc:
            failed.append(f"{name} ({exc})")
    if failed:
        raise DeltaLag(f"{store.uri}: Delta tables not updated: {'; '.join(failed)}; the next run updates them")


def inner(store) -> bool:
    """Whether ``store`` is the folder of a ``segaudit run`` inside ``OUT`` (``OUT/_runs/<run>``): its
    stages are published to ``OUT`` together, as Delta tables there."""
    return posixpath.basename(posixpath.dirname(store.root.rstrip("/"))) == "_runs"


def remove(store, run_folder: str) -> None:
    """The files a run folder (``_runs/<run>``) placed in the Delta tables, removed with it."""
    run = posixpath.basename(run_folder)
    for name in TABLES:
        store.delete(f"{name}/{run}")


def uri(store, name: str) -> str:
    """The URI ``deltalake`` opens the table ``name`` at (``s3a://`` read as ``s3://``)."""
    return _delta_uri(store.path(name))


def storage_options() -> dict[str, str]:
    """delta-rs's S3 settings from AWS's standard environment (credentials it reads itself)."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    options = {}
    if endpoint:
        options |= {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": str(endpoint.startswith("http://")).lower()}
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        options["AWS_REGION"] = region
    return options


def _open(store, name: str):
    """The Delta table at ``OUT/<name>``, or None when there is none yet."""
    if not store.remote and os.path.islink(store.path(name)):
        return None  # a link of segaudit before Delta tables: replaced by the table
    return _open_uri(uri(store, name))


def _commit(store, name: str, source: str | None, version: int, table=None) -> None:
    """One Delta commit making ``OUT/<name>`` the files of ``source`` (a run's table folder; None: none)."""
    from deltalake import Schema
    from deltalake.exceptions import CommitFailedError, DeltaError
    from deltalake.transaction import CommitProperties, Transaction, create_table_with_add_actions

    if not store.remote:
        _clear_local(store.path(name))
    if source is None:
        actions, partitions, schema = [], None, None
    else:
        actions, partitions, schema = _place(store, source, f"{name}/{source.split('/')[1]}")
    last = None
    for attempt in range(TRIES):
        if attempt or table is None:
            table = _open(store, name)
        if table is not None and (table.transaction_version(APP_ID) or -1) >= version:
            return  # another process published this run or a later one
        kept = table.metadata().partition_columns if table is not None else list(PARTITIONED.get(name, ()))
        columns = kept if partitions is None else partitions
        if columns != kept and table is not None:
            raise DeltaLag(f"{name} is partitioned by {kept or 'nothing'}, the run's files by {columns or 'nothing'}")
        if schema is None and table is not None:
            delta_schema = table.schema()  # emptied: the table keeps its columns
        else:
            delta_schema = Schema.from_arrow(_with_partitions(schema or OUT_SCHEMAS[name], columns, OUT_SCHEMAS[name]))
        props = CommitProperties(app_transactions=[Transaction(APP_ID, version)], max_commit_retries=0,
                                 custom_metadata={"segaudit.folder": source or ""})
        try:
            if table is None:
                create_table_with_add_actions(uri(store, name), delta_schema, actions, mode="error",
                                              partition_by=columns or None, name=name,
                                              storage_options=storage_options(), commit_properties=props)
            else:
                table.create_write_transaction(actions, mode="overwrite", schema=delta_schema,
                                               partition_by=columns or None, commit_properties=props)
            return
        except (CommitFailedError, DeltaError) as exc:  # another commit landed first: look again
            last = exc
    raise DeltaLag(f"{name}: {str(last).splitlines()[0][:200]}")


def _clear_local(path: str) -> None:
    """A link of segaudit before Delta tables removed; a folder segaudit did not make left alone."""
    if os.path.islink(path):
        os.unlink(path)
    elif os.path.isdir(path) and os.listdir(path) and not os.path.isdir(os.path.join(path, "_delta_log")):
        raise DeltaLag(f"{path} is a folder segaudit did not make; it is left as it is")


def _place(store, source: str, target: str):
    """The run's Parquet files of ``source`` kept under ``target`` (both relative to ``OUT``): the add
    actions, the partition columns (Hive-style folders) and the files' Arrow schema (None: no file).

    One listing of ``source`` gives each file's size and time; then per file one hard link (a disk) or
    one server-side copy (a bucket); the schema is read from one file's footer."""
    import pyarrow.parquet as pq

    fs, folder = store.fs, posixpath.join(store.root, source)
    infos = _listed(store, source)

    def one(info):
        rel = info.path[len(folder) + 1:]
        _keep(store, info.path, posixpath.join(store.root, target, rel))
        return _add(info, posixpath.join(target.split("/", 1)[1], rel))

    if store.remote:
        from analytics.publish.store import s3_client

        s3_client()  # made once, before the threads share it
    with ThreadPoolExecutor(_THREADS) as pool:
        placed = list(pool.map(one, infos))
    if not placed:
        return [], [], None
    schema = pq.read_schema(infos[0].path, filesystem=fs)  # the run's files share one schema
    return placed, list(placed[0].partition_values), schema


def _listed(store, folder: str) -> list:
    """The Parquet files under ``folder`` (relative to ``store``'s root), by path, from one listing that
    gives their sizes and times (hidden and ``_`` entries left out: Spark's markers, ``_delta_log``)."""
    import pyarrow.fs as pafs

    path = posixpath.join(store.root, folder) if folder else store.root
    infos = [i for i in store.fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
             if i.type == pafs.FileType.File and i.base_name.endswith(".parquet")
             and not any(p.startswith((".", "_")) for p in i.path[len(path) + 1:].split("/"))]
    return sorted(infos, key=lambda i: i.path)


def _add(info, path: str):
    """Delta's add action of a listed file at ``path`` in the table, its partition values from its
    Hive-style folders; no statistics (optional in Delta: readers count rows from the files)."""
    from deltalake.transaction import AddAction

    values = dict(_partition(p) for p in path.split("/")[:-1] if "=" in p)
    mtime_ms = int(info.mtime.timestamp() * 1000) if info.mtime is not None else 0
    return AddAction(path, info.size, values, mtime_ms, True, "{}")


def _keep(store, source: str, target: str) -> None:
    """A file of the run kept under a Delta table (paths inside ``store``'s filesystem): a hard link on
    a disk (a copy on another device), one ``CopyObject`` request in a bucket."""
    if store.remote:
        from analytics.publish.store import copy_object

        copy_object(source, target)
        return
    from analytics.kafka.sinks import keep

    keep(source, target)


def _partition(part: str) -> tuple[str, str | None]:
    key, _, value = part.partition("=")
    value = unquote(value)
    return key, None if value == "__HIVE_DEFAULT_PARTITION__" else value


def _with_partitions(schema, partitions: list[str], contract):
    """The table's Arrow schema: the files' columns and the partition columns (strings), in the
    contract's order (columns it does not name after), without the files' metadata."""
    import pyarrow as pa

    fields = {f.name: f for f in schema if f.name not in partitions}
    fields |= {p: pa.field(p, pa.string()) for p in partitions}
    order = {n: i for i, n in enumerate(contract.names)}
    return pa.schema(sorted(fields.values(), key=lambda f: order.get(f.name, len(order))))


def append(root: str, folder: str) -> None:
    """The Parquet files of ``folder`` (relative to ``root``) appended to the Delta table at ``root`` as
    one commit (the metrics history: a run's rows added, none replaced). A folder of Parquet files
    that is not a Delta table yet (a history of segaudit before Delta tables) becomes one, its files
    first."""
    import pyarrow.parquet as pq
    from deltalake import Schema
    from deltalake.transaction import create_table_with_add_actions

    from analytics.publish.store import Store

    store = Store(root)
    table = _open_uri(_delta_uri(store.path()))
    infos = _listed(store, folder) if table is not None else _listed(store, "")
    actions = [_add(i, i.path[len(store.root) + 1:]) for i in infos]
    if table is not None:
        table.create_write_transaction(actions, mode="append", schema=table.schema())
    elif actions:
        schema = Schema.from_arrow(pq.read_schema(infos[0].path, filesystem=store.fs))
        create_table_with_add_actions(_delta_uri(store.path()), schema, actions, mode="error",
                                      storage_options=storage_options())


def file_uris(root: str) -> list[str] | None:
    """The data files of the Delta table's latest version at ``root`` (as Spark opens them:
    ``s3a://``); None when ``root`` is not a Delta table."""
    table = _open_uri(_delta_uri(root))
    if table is None:
        return None
    return [("s3a://" + u[len("s3://"):]) if u.startswith("s3://") and root.startswith("s3a://") else u
            for u in table.file_uris()]


def _delta_uri(path: str) -> str:
    return "s3://" + path[len("s3a://"):] if path.startswith("s3a://") else path


def _open_uri(path: str):
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(path, storage_options=storage_options())
    except TableNotFoundError:
        return None
