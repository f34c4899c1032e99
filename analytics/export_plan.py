"""The export's plan (:class:`ExportPlan`), made once before Spark starts: what it reads, whether it
is incremental, the bytes it will read and whether it runs in this process or in Spark, with a short
``reason`` for progress output.

It is the run's first decision: the Spark session is sized from it (``input_bytes``,
``incremental``: :func:`analytics.cli.options.spark_session`), and ``incremental`` goes from it to
the audit's plan (:func:`analytics.audit.audit_plan.audit_plan`), which decides what the request
becomes (a full, continued or linked audit). The CLI (``analytics.cli.commands``, which the
spark-submit jobs run) and the library (``analytics.pipeline``) make it here, so a library call gets
the CLI's fast paths. The decision itself is a pure function of a few numbers
(:func:`export_decision`), tested without Spark; its threshold is :mod:`analytics.tuning`'s.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from analytics.contract.vocabulary import EXPORT, MANIFESTS
from analytics.tuning import IN_PROCESS_BYTES, MIB

FULL = "full"  # every input read
CONTINUED = "continued"  # the segment files new or changed since an earlier export read, the others' rows kept
CLUSTER = "cluster"  # a live cluster read over the protocol
# ``session`` of :func:`export_plan`: a local session this process starts when it needs one (the CLI's)
STARTED_HERE = "a local session started when needed"

# a broker's offset and time indexes, which the export does not read (an active segment's are
# preallocated, 10 MiB each by default, whatever the segment holds)
UNREAD = (".index", ".timeindex")


@dataclass(frozen=True)
class ExportPlan:
    """An export: its inputs and ``out``, whether it is ``incremental`` (continuing the export published
    in ``out``), its ``mode`` (``full``, ``continued`` or ``cluster``), whether it runs ``in_process``
    (the data source's tasks in this process, no JVM) or in Spark, the bytes it will read when known,
    and why."""

    paths: tuple[str, ...]
    out: str
    incremental: bool
    mode: str
    in_process: bool
    input_bytes: int | None
    reason: str


def export_plan(paths, out: str, *, incremental: bool = False, session=None) -> ExportPlan:
    """The plan of exporting ``paths`` to ``out``. ``incremental``: continue the export in ``out``
    (read only the segment files new or changed since). ``session``: the Spark the export would
    otherwise run in: None (no Spark: always in this process); a local session this process starts
    when needed (the CLI without ``--master`` or ``--remote``): :data:`STARTED_HERE`, a function
    that starts it, or one still starting (:class:`analytics.spark.concurrent.Starting`); a session
    (in this process only when its master is local); or the master or Spark Connect URL the caller
    named."""
    from analytics.cluster.config import is_cluster

    paths = tuple(paths)
    if any(is_cluster(p) for p in paths):
        return ExportPlan(paths, out, incremental, CLUSTER, False, None, "a live cluster: fetched in Spark")
    size = input_bytes(paths, out, incremental=incremental)
    if session is None:
        here, reason = True, "in this process: no Spark session given"
    else:
        here, reason = export_decision(size, spark_elsewhere(session))
    return ExportPlan(paths, out, incremental, CONTINUED if incremental else FULL, here, size, reason)


def export_decision(size: int | None, elsewhere: str | None) -> tuple[bool, str]:
    """Whether an export of ``size`` input bytes (None: unknown) runs in this process, and why;
    ``elsewhere``: why Spark runs elsewhere than a local session of this process (None: it does not).

    >>> export_decision(1000, None)
    (True, 'in this process: 0.0 MB to read, up to 64 MiB')
    >>> export_decision(1000, "under spark-submit")[0], export_decision(None, None)[0]
    (False, False)
    """
    if elsewhere:
        return False, f"in Spark: {elsewhere}"
    if size is None:
        return False, "in Spark: the input's size is unknown (a bucket, or inputs not found)"
    limit = f"{IN_PROCESS_BYTES // MIB} MiB"
    if size > IN_PROCESS_BYTES:
        return False, f"in Spark: {size / 1e6:,.1f} MB to read, over {limit}"
    return True, f"in this process: {size / 1e6:,.1f} MB to read, up to {limit}"


def spark_elsewhere(session) -> str | None:
    """Why the Spark of ``session`` (see :func:`export_plan`) is not a local one of this process, or
    None when it is: spark-submit's session, a Spark Connect server, a master named, an active session
    a new one would be (perhaps of a cluster)."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return "under spark-submit"
    if "SPARK_REMOTE" in os.environ:
        return "SPARK_REMOTE names a Spark Connect server"
    from analytics.spark.concurrent import Starting

    if session == STARTED_HERE or callable(session) or isinstance(session, Starting):
        from pyspark.sql import SparkSession

        return "a Spark session is active" if SparkSession.getActiveSession() is not None else None
    if isinstance(session, str):
        return f"{session} named"
    try:
        master = session.sparkContext.master
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return "a Spark Connect session"
    return None if master.startswith("local") else f"master {master}"


def input_bytes(paths, out: str | None, *, incremental: bool = False) -> int | None:
    """About how much a stage will read, before Spark starts: the size of its local ``paths``, or
    of the log ``out``'s export was made from (no ``paths``). ``incremental``: what is new since the
    export in ``out``: the segments that are new or changed (``paths`` given), or that the last
    export read (an audit's). None when unknown (a live cluster, a bucket)."""
    try:
        with open(os.path.join(out, MANIFESTS[EXPORT])) as f:
            manifest = json.load(f)
    except (TypeError, OSError, ValueError):
        manifest = None
    known = (manifest or {}).get("segment_files") if incremental else None
    if paths:
        if any("://" in path or not os.path.exists(path) for path in paths):
            return None
        files = [p for p in paths if os.path.isfile(p)]
        files += [os.path.join(folder, name) for p in paths for folder, _, names in os.walk(p) for name in names
                  if not name.endswith(UNREAD)]
        sizes = {os.path.abspath(f): _size(f) for f in files}
        if known:  # only the segments not exported as they are now
            return sum(_unread(size, known.get(f)) for f, size in sizes.items() if f.endswith(".log"))
        return sum(sizes.values())
    if known:  # what the last export read: the files (or, of a grown one, the bytes) it read
        return sum(entry.get("size", 0) - _read_before(entry, manifest["run_id"]) for entry in known.values()
                   if entry.get("read_by") == manifest.get("run_id"))
    try:
        return int(manifest["input_bytes"])
    except (TypeError, KeyError, ValueError):
        return None


def _unread(size: int, entry: dict | None) -> int:
    """The bytes of a segment of ``size`` an incremental export reads, given the previous export's
    ``segment_files`` entry of it: none of an unchanged one, the new bytes of a longer one (as it
    grew), all of a new or shorter one.

    >>> _unread(100, {"size": 100}), _unread(150, {"size": 100}), _unread(80, {"size": 100}), _unread(80, None)
    (0, 50, 80, 80)
    """
    before = (entry or {}).get("size")
    return size - before if before is not None and before <= size else size


def _read_before(entry: dict, run_id: str) -> int:
    """The bytes of a segment the export run ``run_id`` did not read: a grown one's head."""
    before = [p["size"] for p in entry.get("parts") or [] if p["read_by"] != run_id]
    return max(before, default=0)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:  # a broker's cleaner may delete a file between the walk and here
        return 0
