"""The commit log of an ``OUT``: which run's outputs each stage's tables are, version after version.

``OUT/_commits/<version>.json`` (20 digits) names, for every stage published in ``OUT``, the run
folder holding its outputs (``_runs/<run>``), the outputs it holds and the stage's manifest. Each
commit is whole (it repeats the stages it did not change), so the latest one alone says what ``OUT``
holds. It is written last, by a conditional create of the next version's name: of two runs that
read version ``n``, one creates ``n+1``; the other finds it taken and either moves onto the newest
commit (the commits in between changed none of the stages it writes or reads) or gives up
(:class:`Conflict`), however many commits landed meanwhile.

A commit object is never deleted, so a version's name is never free twice: a run that read an old
version always finds the next one taken. Old versions stay readable (time travel) for as long as their
run folders are kept: a run folder the latest commit no longer names is removed only once it is out
of the last :data:`KEEP_COMMITS` commits **and** was retired at least :data:`RETENTION_HOURS` ago
(the default is Delta Lake's VACUUM default, 7 days), so no reader loses a file it resolved in the
middle of a read. Each commit carries the run folders it and the commits before it retired, with the
version and time (``retired``), so collecting garbage reads the latest commit alone.

Each table is also a Delta Lake table at ``OUT/<table>``, a version of it per commit that changed it
(:mod:`analytics.publish.tables`). On a local disk the other outputs (``summary.json``, ``validation``,
``report``) and the manifests are symbolic links into the latest commit's run folders
(:func:`refresh_views`), all through one link, ``OUT/_current``, replaced at once: other tools never
see the outputs of two commits mixed.
"""

from __future__ import annotations

import json
import os
import posixpath
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from analytics.contract import AUDIT, EXPORT, MANIFESTS, RECONCILE, REPORT, VALIDATE, VALIDATION_DIR
from analytics.contract import REPORT_DIR
from analytics.contract.vocabulary import AUDIT_TABLES, EXPORT_TABLES, RECONCILE_TABLES, SUMMARY, TABLES
from analytics.errors import SegauditError, StageMissing
from analytics.processes import identity, still_running
from analytics.publish import tables
from analytics.publish.store import Store

COMMITS = "_commits"
RUNS = "_runs"
VIEWS = "_views"  # local disks: a folder of links per commit shown, ``_views/<version>/<output>``
CURRENT = "_current"  # local disks: the link to the view of the latest commit
PAGES = (REPORT_DIR, VALIDATION_DIR)  # buckets: the folders a browser opens, copied to OUT/<name>
PAGES_FROM = "_copied_from"  # buckets: OUT/<page folder>/_copied_from, the run folder copied there
OWNER = "_owner.json"
LEGACY_JOURNAL = "_publishing.json"  # the swap journal of segaudit before commits
FORMAT = 2  # 2: ``retired`` and ``owner``; a format 1 commit reads with nothing retired
DIGITS = 20

# What each stage owns under OUT: a new run of it replaces all of them.
OUTPUTS = {
    EXPORT: EXPORT_TABLES,
    AUDIT: (*AUDIT_TABLES, SUMMARY),
    VALIDATE: (VALIDATION_DIR,),
    REPORT: (REPORT_DIR,),
    RECONCILE: RECONCILE_TABLES,
}
# The stage each stage reads: its manifest's run id goes into ``built_from``.
UPSTREAM = {EXPORT: None, AUDIT: EXPORT, VALIDATE: AUDIT, REPORT: AUDIT, RECONCILE: AUDIT}

# A retired run folder is kept while it is in the last KEEP_COMMITS commits (never fewer than 2: a
# reader that resolved the previous commit just before a new one still finds its files) or was retired
# less than RETENTION_HOURS ago. SEGAUDIT_KEEP_COMMITS and SEGAUDIT_RETENTION_HOURS set them.
KEEP_COMMITS = 2
RETENTION_HOURS = 7 * 24.0
# A run folder no commit names, whose process cannot be asked (another host, container or boot), is
# abandoned after this.
ABANDONED_AFTER_S = 24 * 3600
# A commit whose next version is taken but not yet visible (a conditional PUT in flight: S3 answers
# 409) is tried again after a growing, jittered pause, for at most this long.
COMMIT_PATIENCE_S = 60.0


class Conflict(SegauditError):
    """Another run committed to the same ``OUT`` a stage this run writes or reads (exit 2)."""


@dataclass(frozen=True)
class Snapshot:
    """What ``OUT`` holds at one commit: per stage, ``root`` (its run folder), ``outputs`` and ``manifest``.

    ``legacy``: an ``OUT`` written before commits existed (outputs at the root, manifests beside them)."""

    version: int
    stages: Mapping[str, Mapping] = field(default_factory=dict)
    legacy: bool = False
    committed_at_ms: int = 0
    retired: Mapping[str, Mapping] = field(default_factory=dict)  # run folder -> {"version", "at_ms"}

    def location(self, name: str) -> str | None:
        """Where the output ``name`` is, relative to ``OUT``; None when no stage holds it."""
        for entry in self.stages.values():
            if name in entry["outputs"]:
                return posixpath.join(entry["root"], name) if entry["root"] else name
        return None

    def manifest(self, stage: str) -> dict | None:
        entry = self.stages.get(stage)
        return dict(entry["manifest"]) if entry else None

    def runs(self) -> set[str]:
        """The run folders (``_runs/<run>``, top level) this commit names."""
        return _runs(self.stages)


def _runs(stages: Mapping[str, Mapping]) -> set[str]:
    return {"/".join(e["root"].split("/")[:2]) for e in stages.values() if e["root"]}


def commit_name(version: int) -> str:
    return f"{COMMITS}/{version:0{DIGITS}d}.json"


def versions(store: Store) -> list[int]:
    """The versions of the commits in ``OUT``, oldest first."""
    return sorted(int(n[:-5]) for n in store.names(COMMITS) if n.endswith(".json") and n[:-5].isdigit())


def latest(store: Store) -> Snapshot:
    """The latest commit of ``OUT`` (version 0 and no stages when there is none)."""
    found = versions(store)
    if found:
        return read(store, found[-1])
    return _legacy(store)


def read(store: Store, version: int) -> Snapshot:
    doc = json.loads(store.read_text(commit_name(version)))
    return Snapshot(doc["version"], doc["stages"], committed_at_ms=doc.get("committed_at_ms", 0),
                    retired=doc.get("retired", {}))


def at(store: Store, version: int | None = None, timestamp_ms: int | None = None) -> Snapshot:
    """The commit of ``version``, or the latest one committed at or before ``timestamp_ms``;
    :class:`StageMissing` when there is none. Its run folders may be gone (:func:`kept`)."""
    found = versions(store)
    if version is not None:
        if version not in found:
            raise StageMissing(f"{store.uri} has no version {version} (its versions: {_span(found)})")
        return read(store, version)
    lo, hi = 0, len(found)  # the first commit after the time: commits are created in time order
    while lo < hi:
        mid = (lo + hi) // 2
        if read(store, found[mid]).committed_at_ms <= timestamp_ms:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        first = f"; its first commit is at {_when(read(store, found[0]).committed_at_ms)}" if found else ""
        raise StageMissing(f"{store.uri} was not yet published at {_when(timestamp_ms)}{first}")
    return read(store, found[lo - 1])


def kept(store: Store, snapshot: Snapshot) -> bool:
    """Whether every run folder a commit names is still there (retention removes those of old commits)."""
    return all(store.exists(folder) for folder in snapshot.runs())


def _span(found: list[int]) -> str:
    return f"{found[0]} to {found[-1]}" if found else "none"


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def _legacy(store: Store) -> Snapshot:
    """An ``OUT`` of segaudit before commits, read as version 0: its outputs where they are."""
    stages = {}
    for stage, manifest in MANIFESTS.items():
        if stage in OUTPUTS and store.is_file(manifest):
            if store.is_file(LEGACY_JOURNAL):
                raise StageMissing(f"{store.uri} holds a publication an older segaudit left unfinished "
                                   f"({LEGACY_JOURNAL}); finish it with that version, or remove {store.uri}")
            outputs = [n for n in OUTPUTS[stage] if store.exists(n)]
            stages[stage] = {"root": "", "outputs": outputs, "manifest": json.loads(store.read_text(manifest))}
    return Snapshot(0, stages, legacy=bool(stages))


def commit(store: Store, base: Snapshot, changes: Mapping[str, Mapping], run_id: str) -> Snapshot:
    """Commit ``changes`` (by stage: root, outputs, manifest) on top of ``base``, the commit the run
    read its inputs from. When other runs committed since, however many, the commit moves onto the
    newest if none of them changed a stage this one writes or reads; otherwise :class:`Conflict`.
    A version taken but not yet visible is tried again with backoff (:data:`COMMIT_PATIENCE_S`)."""
    if base.legacy:
        base = _adopt(store, base)
    touched = set(changes) | {UPSTREAM[s] for s in changes if UPSTREAM.get(s)}
    latest_seen, pause, deadline = base, 0.05, time.monotonic() + COMMIT_PATIENCE_S
    while True:
        now_ms, version = int(time.time() * 1000), latest_seen.version + 1
        stages = {**latest_seen.stages, **{s: {**e, "version": version} for s, e in changes.items()}}
        new = Snapshot(version, stages, committed_at_ms=now_ms,
                       retired=_retired(latest_seen, version, _runs(stages), now_ms))
        doc = {"format": FORMAT, "version": new.version, "run_id": run_id, "committed_at_ms": now_ms,
               "owner": identity(), "stages": new.stages, "retired": new.retired}
        if store.create_text(commit_name(new.version), json.dumps(doc, indent=1, sort_keys=True) + "\n"):
            return new
        now = latest(store)
        changed = sorted(s for s in touched if now.stages.get(s) != base.stages.get(s))
        if changed:
            by = {now.stages[s]["manifest"].get("run_id") for s in changed if s in now.stages}
            raise Conflict(f"{store.uri} was published by another run ({', '.join(sorted(map(str, by)))}: "
                           f"{', '.join(changed)}) while this one ran; nothing of run {run_id} was published")
        if now.version <= latest_seen.version:  # taken, not yet visible: another commit in flight
            if time.monotonic() > deadline:
                raise Conflict(f"{store.uri}: version {latest_seen.version + 1} stayed taken but unreadable for "
                               f"{COMMIT_PATIENCE_S:.0f} s; nothing of run {run_id} was published")
            time.sleep(pause * random.uniform(0.5, 1.5))
            pause = min(pause * 2, 2.0)
        latest_seen = now


def _retired(previous: Snapshot, version: int, still: set[str], now_ms: int) -> dict[str, dict]:
    """The run folders retired by commit ``version`` (named by ``previous``, not in ``still``) and by the
    commits before it, less those past retention already at ``previous``: the garbage collection
    after ``previous`` found them in its list and removed them."""
    carried = {folder: dict(entry) for folder, entry in previous.retired.items()
               if folder not in still and not _past_retention(entry, previous.version, previous.committed_at_ms)}
    carried |= {folder: {"version": version, "at_ms": now_ms} for folder in previous.runs() - still}
    return carried


def _past_retention(entry: Mapping, latest_version: int, now_ms: int) -> bool:
    """Whether a run folder retired at ``entry`` may go: out of the last ``keep`` commits (it was last
    named by version ``entry.version - 1``) and retired longer ago than the retention."""
    keep = max(2, int(os.environ.get("SEGAUDIT_KEEP_COMMITS", KEEP_COMMITS)))
    hours = float(os.environ.get("SEGAUDIT_RETENTION_HOURS", RETENTION_HOURS))
    return entry["version"] - 1 <= latest_version - keep and now_ms - entry["at_ms"] >= hours * 3600_000


def _adopt(store: Store, legacy: Snapshot) -> Snapshot:
    """Move a legacy ``OUT``'s outputs into run folders and commit them as version 1 (local disks:
    only they held legacy outputs)."""
    stages = {}
    for stage, entry in legacy.stages.items():
        root = f"{RUNS}/{entry['manifest'].get('run_id') or 'legacy'}-{stage}"
        store.makedirs(root)
        for name in [*entry["outputs"], MANIFESTS[stage]]:
            os.replace(store.path(name), store.path(root, name))
        stages[stage] = {**entry, "root": root}
    doc = {"format": FORMAT, "version": 1, "run_id": "legacy", "committed_at_ms": int(time.time() * 1000),
           "owner": identity(), "stages": stages, "retired": {}}
    if not store.create_text(commit_name(1), json.dumps(doc, indent=1, sort_keys=True) + "\n"):
        raise Conflict(f"{store.uri} was converted to commits by another run meanwhile; run again")
    return Snapshot(1, stages, committed_at_ms=doc["committed_at_ms"])


def refresh_views(store: Store, snapshot: Snapshot) -> None:
    """On a local disk, show ``snapshot`` (unless a later commit is shown already): its links into the
    run folders are made in a view folder of their own, ``_views/<version>``, and ``_current`` is
    pointed at it by one atomic replace; ``OUT/<output>`` and ``OUT/<manifest>`` link to
    ``_current/<name>``, and those of outputs no longer published go. So a reader finds every output
    of one commit. An object store has no links: readers resolve the commit, and the pages a browser
    opens are copied to where they always are (:func:`_copy_pages`)."""
    if store.remote:
        _copy_pages(store, snapshot)
    if store.remote or snapshot.version == 0:
        return
    wanted = {}
    for stage, entry in snapshot.stages.items():
        if entry["root"]:
            wanted |= {name: posixpath.join(entry["root"], name) for name in [*entry["outputs"], MANIFESTS[stage]]
                       if name not in TABLES}  # a table is a Delta table there (analytics.publish.tables)
    shown = _shown_version(store)
    if shown is not None and shown > snapshot.version:
        return
    view = f"{VIEWS}/{snapshot.version}"
    if not store.is_dir(view):
        building = f"{VIEWS}/.{snapshot.version}-{os.getpid()}-{random.getrandbits(32):08x}"
        store.makedirs(building)
        for name, target in wanted.items():
            store.link(f"{building}/{name}", target)
        try:
            os.rename(store.path(building), store.path(view))  # whole, or another process's is there
        except OSError:
            store.delete(building)
    if shown != snapshot.version:
        store.link(CURRENT, view)
    # a copy of OUT made by following its links holds a folder of that name: OUT's names then link
    # straight into the run folders, one at a time
    through = os.path.islink(store.path(CURRENT)) or not os.path.lexists(store.path(CURRENT))
    for name, target in wanted.items():
        to = f"{CURRENT}/{name}" if through else os.path.relpath(store.path(target), store.root)
        if not (os.path.islink(store.path(name)) and os.readlink(store.path(name)) == to):
            store.link(name, f"{CURRENT}/{name}" if through else target)
    for name in store.links():
        if name not in wanted and name in _VIEWABLE:
            store.delete(name)
    older = sorted(int(n) for n in store.names(VIEWS) if n.isdigit() and int(n) < snapshot.version)
    for version in older[:-1]:  # the view shown just before stays for a reader in the middle of a lookup
        store.delete(f"{VIEWS}/{version}")


def _copy_pages(store: Store, snapshot: Snapshot) -> None:
    """In a bucket, the report and the validation (its Data Docs) of the latest commit copied to
    ``OUT/report/`` and ``OUT/validation/``: a stable address for each, where their links to each
    other work as they do on a disk. A server-side copy a file, the page's own files left last, then
    the files of an older copy that the new one does not have removed; skipped when the copy there
    came from the same run folder (``PAGES_FROM`` names it) or a later commit landed meanwhile (its own
    run copies them). Each file is whole; a reader in the middle of the refresh may see pages of two
    commits, and ``segaudit open --as-of`` gives any one commit's whole."""
    if snapshot.version == 0:
        return
    for entry in snapshot.stages.values():
        for name in (n for n in entry["outputs"] if n in PAGES and entry["root"]):
            source = posixpath.join(entry["root"], name)
            try:
                if store.read_text(f"{name}/{PAGES_FROM}") == source:
                    continue
            except OSError:
                pass
            if latest(store).version != snapshot.version:
                return
            wanted = store.files(source)
            for file in sorted(wanted, key=lambda f: (f.endswith("index.html"), f)):
                store.copy(f"{source}/{file}", f"{name}/{file}")
            for stale in store.files(name) - wanted - {PAGES_FROM}:
                store.delete(f"{name}/{stale}")
            store.write_text(f"{name}/{PAGES_FROM}", source)


def _shown_version(store: Store) -> int | None:
    """The version ``_current`` shows; None when there is none."""
    try:
        target = os.readlink(store.path(CURRENT))
    except OSError:
        return None
    last = target.rsplit("/", 1)[-1]
    return int(last) if last.isdigit() else None


_VIEWABLE = {n for names in OUTPUTS.values() for n in names} | set(MANIFESTS.values())


def claim(store: Store, folder: str) -> None:
    """Mark a run folder with the process that owns it (:func:`analytics.processes.identity`)."""
    store.write_text(f"{folder}/{OWNER}", json.dumps({**identity(), "started_at_ms": int(time.time() * 1000)}))


def collect(store: Store) -> list[str]:
    """Remove the garbage of ``OUT``: the run folders the latest commit neither names nor keeps as
    retired within retention (:func:`_past_retention`), unless a live run holds them. Reads the latest
    commit alone; never removes a commit object. Returns the run folders removed."""
    snapshot = latest(store)
    if snapshot.legacy:
        return []
    held, now_ms = snapshot.runs(), int(time.time() * 1000)
    removed = []
    for name in store.names(RUNS):
        folder = f"{RUNS}/{name}"
        if folder in held:
            continue
        entry = snapshot.retired.get(folder)
        if entry is not None and not _past_retention(entry, snapshot.version, now_ms):
            continue
        if entry is None and not _abandoned(store, folder):
            continue
        store.delete(folder)
        if not tables.inner(store):
            tables.remove(store, folder)
        removed.append(folder)
    return removed


def _abandoned(store: Store, folder: str) -> bool:
    """Whether a run folder no commit keeps is garbage: its process is gone (one this process can see),
    or it is older than :data:`ABANDONED_AFTER_S` (another host, container or boot; no owner file)."""
    try:
        owner = json.loads(store.read_text(f"{folder}/{OWNER}"))
    except (OSError, ValueError):
        owner = {}
    running = still_running(owner)
    if running is not None:
        return not running
    started = owner.get("started_at_ms") or 0
    return time.time() * 1000 - started > ABANDONED_AFTER_S * 1000
