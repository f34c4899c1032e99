"""The commit log of an ``OUT``: which run's outputs each stage's tables are, version after version.

``OUT/_commits/<version>.json`` (20 digits) names, for every stage published in ``OUT``, the run
folder holding its outputs (``_runs/<run>``), the outputs it holds and the stage's manifest. Each
commit is whole (it repeats the stages it did not change), so the latest one alone says what ``OUT``
holds. It is written last, by a conditional create of the next version's name: of two runs that
read version ``n``, one creates ``n+1``; the other finds it taken and either moves onto it (the
commit in between changed none of the stages it writes or reads) or gives up (:class:`Conflict`).

On a local disk ``OUT/<table>`` and the manifests are symbolic links into the latest commit's run
folders (:func:`refresh_views`): other tools read ``OUT/batches`` as before.
"""

from __future__ import annotations

import json
import os
import posixpath
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from analytics.contract import AUDIT, EXPORT, MANIFESTS, RECONCILE, REPORT, VALIDATE, VALIDATION_DIR
from analytics.contract import REPORT_DIR
from analytics.contract.vocabulary import AUDIT_TABLES, EXPORT_TABLES, RECONCILE_TABLES, SUMMARY
from analytics.errors import SegauditError, StageMissing
from analytics.processes import alive
from analytics.publish.store import Store

COMMITS = "_commits"
RUNS = "_runs"
OWNER = "_owner.json"
LEGACY_JOURNAL = "_publishing.json"  # the swap journal of segaudit before commits
FORMAT = 1
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

# Commits whose runs are kept (the latest and the one before at least: a reader that resolved the
# previous commit just before a new one still finds its files). SEGAUDIT_KEEP_COMMITS sets it.
KEEP_COMMITS = 2
# A run folder no commit names, whose process cannot be asked (another host), is abandoned after this.
ABANDONED_AFTER_S = 24 * 3600


class Conflict(SegauditError):
    """Another run committed to the same ``OUT`` a stage this run writes or reads (exit 2)."""


@dataclass(frozen=True)
class Snapshot:
    """What ``OUT`` holds at one commit: per stage, ``root`` (its run folder), ``outputs`` and ``manifest``.

    ``legacy``: an ``OUT`` written before commits existed (outputs at the root, manifests beside them)."""

    version: int
    stages: Mapping[str, Mapping] = field(default_factory=dict)
    legacy: bool = False

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
        return {"/".join(e["root"].split("/")[:2]) for e in self.stages.values() if e["root"]}


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
    return Snapshot(doc["version"], doc["stages"])


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
    read its inputs from. When another run committed since, the commit moves onto it if that run
    changed none of the stages this one writes or reads; otherwise :class:`Conflict`."""
    if base.legacy:
        base = _adopt(store, base)
    touched = set(changes) | {UPSTREAM[s] for s in changes if UPSTREAM.get(s)}
    while True:
        new = Snapshot(base.version + 1, {**base.stages, **changes})
        doc = {"format": FORMAT, "version": new.version, "run_id": run_id, "committed_at_ms": int(time.time() * 1000),
               "host": socket.gethostname(), "pid": os.getpid(), "stages": new.stages}
        if store.create_text(commit_name(new.version), json.dumps(doc, indent=1, sort_keys=True) + "\n"):
            return new
        now = latest(store)
        changed = sorted(s for s in touched if now.stages.get(s) != base.stages.get(s))
        if changed:
            by = {now.stages[s]["manifest"].get("run_id") for s in changed if s in now.stages}
            raise Conflict(f"{store.uri} was published by another run ({', '.join(sorted(map(str, by)))}: "
                           f"{', '.join(changed)}) while this one ran; nothing of run {run_id} was published")
        base = now


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
           "host": socket.gethostname(), "pid": os.getpid(), "stages": stages}
    if not store.create_text(commit_name(1), json.dumps(doc, indent=1, sort_keys=True) + "\n"):
        raise Conflict(f"{store.uri} was converted to commits by another run meanwhile; run again")
    return Snapshot(1, stages)


def refresh_views(store: Store, snapshot: Snapshot) -> None:
    """On a local disk: ``OUT/<output>`` and ``OUT/<manifest>`` link into the commit's run folders;
    links to outputs no longer published go. An object store has no links: readers resolve."""
    if store.remote:
        return
    wanted = {}
    for stage, entry in snapshot.stages.items():
        if entry["root"]:
            wanted |= {name: posixpath.join(entry["root"], name) for name in [*entry["outputs"], MANIFESTS[stage]]}
    for name, target in wanted.items():
        current = store.path(name)
        if not (os.path.islink(current) and os.readlink(current) == os.path.relpath(store.path(target), store.root)):
            store.link(name, target)
    for name in store.links():
        if name not in wanted and name in _VIEWABLE:
            store.delete(name)


_VIEWABLE = {n for names in OUTPUTS.values() for n in names} | set(MANIFESTS.values())


def claim(store: Store, folder: str) -> None:
    """Mark a run folder with the process that owns it."""
    store.write_text(f"{folder}/{OWNER}", json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                                     "started_at_ms": int(time.time() * 1000)}))


def collect(store: Store, keep: int | None = None) -> list[str]:
    """Garbage: the run folders that neither the latest ``keep`` commits nor a live run hold, and the
    commits before those. Never what the latest two commits name. Returns the run folders removed."""
    keep = max(2, keep if keep is not None else int(os.environ.get("SEGAUDIT_KEEP_COMMITS", KEEP_COMMITS)))
    found = versions(store)
    kept, old = found[-keep:], found[:-keep]
    held = set().union(*(read(store, v).runs() for v in kept)) if kept else set()
    superseded = set().union(*(read(store, v).runs() for v in old)) if old else set()
    removed = []
    for name in store.names(RUNS):
        folder = f"{RUNS}/{name}"
        if folder not in held and (folder in superseded or _abandoned(store, folder)):
            store.delete(folder)
            removed.append(folder)
    for version in old:
        store.delete(commit_name(version))
    return removed


def _abandoned(store: Store, folder: str) -> bool:
    """Whether a run folder no kept commit names is garbage: its process is gone (this host), or it
    is older than :data:`ABANDONED_AFTER_S` (another host, or no owner file)."""
    try:
        owner = json.loads(store.read_text(f"{folder}/{OWNER}"))
    except (OSError, ValueError):
        owner = {}
    if owner.get("host") == socket.gethostname() and owner.get("pid"):
        return not alive(int(owner["pid"]))
    started = owner.get("started_at_ms") or 0
    return time.time() * 1000 - started > ABANDONED_AFTER_S * 1000
