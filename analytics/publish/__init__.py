"""Publishing a stage's outputs under ``OUT``: the one way every stage writes, on a disk or in a bucket.

A run of a stage (export, audit, validate, report, reconcile) writes everything into a folder of its
own, ``OUT/_runs/<run>/``, claimed by its process and never moved. When all of it is complete, one
small commit object, ``OUT/_commits/<version>.json``, is created with a conditional write
(:mod:`analytics.publish.commits`): it names the run folder of every stage ``OUT`` holds. Readers
resolve a table through the latest commit (:func:`published`), never a folder listing of ``OUT``,
so they see the previous complete outputs or the new ones, never a mix, and no rename is needed:
object stores have none.

- A run that dies before its commit leaves ``OUT`` as it was; its folder is garbage for a later run
  (:func:`commits.collect`, which also removes the run folders of old commits once they are past
  retention: out of the last few commits and retired at least 7 days ago).
- Of two runs that commit the same stage, one wins; the other raises :class:`commits.Conflict` and
  publishes nothing, however many commits landed while it ran. Commits are never deleted.
- A past version of ``OUT`` reads as the latest does while retention keeps its files
  (``published(out, as_of)``: time travel).
- SIGINT and SIGTERM wait while a commit is created, and none starts after a signal
  (:func:`refuse_commits`).
- ``segaudit run`` runs its stages in one folder that is itself laid out like ``OUT`` (its stages
  commit into it as usual) and commits them to ``OUT`` at once (:func:`unit`).

Each manifest records the run ids of the stages it was built from (``built_from``), so a reader
can tell outputs that belong together from a mix.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from analytics.contract import MANIFESTS, STAGES
from analytics.errors import StageMissing
from analytics.publish import commits, tables
from analytics.publish.commits import OUTPUTS, RUNS, UPSTREAM, Conflict, Snapshot
from analytics.publish.store import Store, check_commit_scheme

__all__ = ["OUTPUTS", "UPSTREAM", "AsOf", "Conflict", "Publication", "Published", "Store", "Unit", "out_of_step",
           "publication", "published", "read_manifest", "refuse_commits", "unit"]

COMMANDS = {"export": "segaudit export LOGDIR --out {out}", "audit": "segaudit audit {out}",
            "validate": "segaudit validate {out}", "report": "segaudit report {out}",
            "reconcile": "segaudit reconcile {out}"}


def new_run_id() -> str:
    """A run id: the UTC start time (sortable) and a random suffix (unique)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


@dataclass(frozen=True)
class AsOf:
    """A past version of ``OUT``: a commit's version, or a time (epoch ms) whose latest commit it is."""

    version: int | None = None
    timestamp_ms: int | None = None

    def __str__(self) -> str:
        return f"version {self.version}" if self.version is not None else time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.timestamp_ms / 1000))


@dataclass(frozen=True)
class Published:
    """What ``OUT`` holds at one commit (the latest unless ``pinned``): where each output is, and each
    stage's manifest."""

    store: Store
    snapshot: Snapshot
    pinned: bool = False  # a past version (--as-of): OUT's links show the latest, so paths are resolved

    def resolve(self, name: str) -> str:
        """A path under ``OUT`` as it is published: its first part, an output, is looked up in the commit."""
        first, _, rest = name.partition("/")
        found = self.snapshot.location(first) or first
        return f"{found}/{rest}" if rest else found

    def path(self, *parts: str) -> str:
        """The full path (or URI) of an output (and a path inside it), as Spark and pyarrow take it;
        ``OUT`` itself with no parts."""
        return self.store.path(self.resolve("/".join(parts))) if parts else self.store.path()

    def shown(self, *parts: str) -> str:
        """A published output's path as an operator is told it: on a local disk through ``OUT``'s link
        (``OUT/report/index.html``, the same place run after run), on an object store where it is."""
        return self.store.path(*parts) if not (self.store.remote or self.pinned) else self.path(*parts)

    def has(self, name: str) -> bool:
        """Whether a published stage holds the output ``name``."""
        return self.snapshot.location(name) is not None

    def is_dir(self, name: str) -> bool:
        return self.has(name.partition("/")[0]) and self.store.is_dir(self.resolve(name))

    def is_file(self, name: str) -> bool:
        return self.has(name.partition("/")[0]) and self.store.is_file(self.resolve(name))

    def names(self, name: str) -> list[str]:
        return self.store.names(self.resolve(name)) if self.has(name.partition("/")[0]) else []

    def size(self, name: str) -> int:
        return self.store.size(self.resolve(name)) if self.has(name.partition("/")[0]) else 0

    def read_text(self, name: str) -> str:
        return self.store.read_text(self.resolve(name))

    @property
    def fs(self):
        """The pyarrow filesystem of ``OUT``."""
        return self.store.fs

    def _p(self, name: str) -> str:
        """The filesystem path of an output (pyarrow's, without a scheme)."""
        return self.store._p(self.resolve(name))

    def out_of_step(self, stages: Iterable[str], out: str) -> str | None:
        """Why these published stages do not belong together, or None (:func:`out_of_step`)."""
        return _out_of_step(self, stages, out)

    def manifest(self, stage: str) -> dict:
        """The manifest of a stage's complete output; :class:`StageMissing` when there is none."""
        found = self.snapshot.manifest(stage)
        if found is None:
            out = self.store.uri
            raise StageMissing(f"{out} holds no complete {stage} (no {MANIFESTS[stage]}); "
                               f"run `{COMMANDS[stage].format(out=out)}` first")
        return found


def published(out: str, as_of: AsOf | None = None) -> Published:
    """``OUT`` as its latest commit has it, or the commit ``as_of`` names; :class:`StageMissing` when
    there is no ``OUT``, no such commit, or retention removed that commit's files."""
    store = Store(out)
    if as_of is None:
        snapshot = commits.latest(store)
        if snapshot.version == 0 and not snapshot.stages and not store.is_dir(""):
            raise StageMissing(f"{out}: no such directory")
        return Published(store, snapshot)
    if not store.is_dir(""):
        raise StageMissing(f"{out}: no such directory")
    snapshot = commits.at(store, as_of.version, as_of.timestamp_ms)
    if not commits.kept(store, snapshot):
        raise StageMissing(f"{out}: version {snapshot.version} (as of {as_of}) is past retention: its files were "
                           f"removed (SEGAUDIT_RETENTION_HOURS, SEGAUDIT_KEEP_COMMITS)")
    return Published(store, snapshot, pinned=True)


def shown_path(out: str, *parts: str) -> str:
    """A published output's path as an operator is told it (:meth:`Published.shown`): on a local disk
    ``OUT``'s link, found without reading the commit."""
    store = Store(out)
    return store.path(*parts) if not store.remote else published(out).path(*parts)


def continued(out: str) -> str:
    """The ``OUT`` whose published stages an incremental stage writing into ``out`` continues: the
    ``OUT`` a ``segaudit run``'s folder (``OUT/_runs/<run>``, :func:`unit`) is published to, else
    ``out`` itself."""
    parent = posixpath.dirname(out.rstrip("/"))
    above = posixpath.dirname(parent)
    return above if posixpath.basename(parent) == RUNS and above and Store(above).is_dir(commits.COMMITS) else out


def read_manifest(out: str, stage: str, as_of: AsOf | None = None) -> dict:
    """The manifest of a stage's complete output under ``out``; :class:`StageMissing` when there is none."""
    return published(out, as_of).manifest(stage)


@dataclass
class _Run:
    """A run folder under ``OUT`` claimed by this process: ``with`` creates it; leaving the block
    without a commit removes it and leaves ``OUT`` as it was."""

    store: Store
    run_id: str
    base: Snapshot  # the commit the run reads its inputs from, and commits on top of
    made_root: bool = False  # OUT did not exist before this run: a run that publishes nothing leaves none
    published: bool = field(default=False, init=False)

    @property
    def folder(self) -> str:
        return f"{RUNS}/{self.run_id}"

    def __enter__(self):
        self.store.makedirs(self.folder)
        commits.claim(self.store, self.folder)
        return self

    def __exit__(self, *exc) -> None:
        if not self.published:
            self.store.delete(self.folder)
            if not self.store.names(RUNS):
                self.store.delete(RUNS)
            if self.made_root and not self.store.names():
                self.store.delete("")

    def _commit(self, changes: dict) -> Snapshot:
        with _uninterrupted():
            if _refused:
                raise _refused[0]
            snapshot = commits.commit(self.store, self.base, changes, self.run_id)
            self.published = True
        commits.refresh_views(self.store, snapshot)
        _delta_tables(self.store, snapshot)
        try:
            commits.collect(self.store)
        except OSError:  # published all the same: a later run collects what this one could not
            pass
        return snapshot


@dataclass
class Publication(_Run):
    """One run of a stage, from its run folder to its commit.

    ``with publication(out, stage) as p:`` creates and claims the run folder; the body writes into
    ``p.path(name)`` and ends with ``p.publish(manifest)``; leaving the block in any other way (an
    error, Ctrl-C) removes the folder and leaves ``OUT`` as it was.
    """

    stage: str = ""
    built_from: dict = field(default_factory=dict)

    def path(self, *parts: str) -> str:
        """Where the run writes an output (a Spark or pyarrow path)."""
        return self.store.path(self.folder, *parts)

    def shown(self, *parts: str) -> str:
        """Where an output of this run will be, as an operator is told it (:meth:`Published.shown`)."""
        return self.store.path(*parts) if not self.store.remote else self.path(*parts)

    def written(self) -> list[str]:
        """The outputs written so far (names starting with ``_`` or ``.`` are the run's scratch)."""
        return [n for n in self.store.names(self.folder) if not n.startswith(("_", "."))]

    def publish(self, manifest: dict) -> dict:
        """Commit the outputs written; the manifest gets the run id, the stage and ``built_from``."""
        manifest = {"run_id": self.run_id, "stage": self.stage, "built_from": self.built_from,
                    **manifest, "finished_at_ms": int(time.time() * 1000)}
        outputs = self.written()
        unknown = sorted(set(outputs) - set(OUTPUTS[self.stage]))
        if unknown:
            raise ValueError(f"the {self.stage} stage does not own {', '.join(unknown)}")
        self.store.write_text(f"{self.folder}/{MANIFESTS[self.stage]}",
                              json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        self._commit({self.stage: {"root": self.folder, "outputs": outputs, "manifest": manifest}})
        return manifest


@dataclass
class Unit(_Run):
    """Several stages run in one folder laid out like ``OUT`` and committed to ``OUT`` together.

    ``with unit(out) as u:`` the body runs the stages with ``u.out`` as their ``OUT`` (each commits
    into it as usual) and ends with ``u.publish()``; leaving the block in any other way removes the
    folder and leaves ``OUT`` as it was.
    """

    @property
    def out(self) -> str:
        """The folder the stages write to, as ``OUT`` for them."""
        return self.store.path(self.folder)

    def publish(self, stages: Iterable[str] = STAGES) -> dict[str, dict]:
        """Commit every stage's outputs and manifest at once; the manifests, by stage."""
        inner = commits.latest(Store(self.out))
        changes = {}
        for stage in stages:
            entry = inner.stages.get(stage)
            if entry is None:
                raise StageMissing(f"{self.out} holds no complete {stage}")
            changes[stage] = {**entry, "root": f"{self.folder}/{entry['root']}"}
        self._commit(changes)
        return {stage: dict(entry["manifest"]) for stage, entry in changes.items()}


def _opened(out: str) -> tuple[Store, Snapshot, bool]:
    """``OUT``'s store and latest commit; ``OUT`` is created, its views repaired, its garbage removed."""
    check_commit_scheme(out)
    store = Store(out)
    made = not store.is_dir("")
    store.makedirs("")
    snapshot = commits.latest(store)
    commits.refresh_views(store, snapshot)
    _delta_tables(store, snapshot)
    commits.collect(store)
    return store, snapshot, made


def _delta_tables(store: Store, snapshot: Snapshot) -> None:
    """The Delta tables brought up to ``snapshot``; when they cannot be, one line says so and the run
    goes on (its commit stands; the next command that writes ``OUT`` tries again)."""
    try:
        tables.publish(store, snapshot, OUTPUTS)
    except (tables.DeltaLag, OSError) as exc:
        print(f"segaudit: warning: {str(exc).splitlines()[0]}", file=sys.stderr)


def unit(out: str) -> Unit:
    """A new set of stages under ``out``, committed as one (``segaudit run``)."""
    store, base, made = _opened(out)
    return Unit(store, new_run_id(), base, made_root=made)


def publication(out: str, stage: str, *, built_from: dict | None = None) -> Publication:
    """A new run of ``stage`` under ``out``: ``out`` is created, abandoned runs are cleared.

    ``built_from`` defaults to the run id of the upstream stage's manifest (the export for an
    audit, the audit for a validation or a report); :class:`StageMissing` when there is none.
    """
    store, base, made = _opened(out)
    if built_from is None:
        upstream = UPSTREAM[stage]
        built_from = {upstream: Published(store, base).manifest(upstream)["run_id"]} if upstream else {}
    return Publication(store, new_run_id(), base, made_root=made, stage=stage, built_from=built_from)


_refused: list[BaseException] = []


def refuse_commits(reason: BaseException | None) -> None:
    """From now on every commit raises ``reason`` instead; None allows commits again.

    For a signal's handler: it raises where the main thread happens to be, and when that is a
    finalizer or a weakref callback (Py4J releases Java objects in them), Python drops the
    exception and the stage runs on. Whatever it finishes, it must not publish."""
    _refused.clear()
    if reason is not None:
        _refused.append(reason)


@contextlib.contextmanager
def _uninterrupted() -> Iterator[None]:
    """SIGINT and SIGTERM are held until the block ends, then delivered (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {s: signal.signal(s, lambda n, _f: held.append(n)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if held:
            signal.raise_signal(held[0])


def out_of_step(out: str, stages: Iterable[str], as_of: AsOf | None = None) -> str | None:
    """Why the published ``stages`` under ``out`` (at ``as_of``) do not belong together, or None when they do.

    Each stage's ``built_from`` must name the run id its upstream stage has now: an audit of an
    older export, or a validation of an older audit, is stale.
    """
    return published(out, as_of).out_of_step(stages, out)


def _out_of_step(view: Published, stages: Iterable[str], out: str) -> str | None:
    manifests = {s: view.manifest(s) for s in stages}
    for stage, manifest in manifests.items():
        upstream = UPSTREAM[stage]
        if upstream is None:
            continue
        current = manifests.get(upstream) or view.manifest(upstream)
        built = (manifest.get("built_from") or {}).get(upstream)
        if built is not None and built != current["run_id"]:
            return (f"{out}: the {stage} was built from {upstream} run {built}, but the {upstream} there is run "
                    f"{current['run_id']}; run `{COMMANDS[stage].format(out=out)}` again")
    return None
