"""Publishing a stage's outputs under ``OUT`` atomically: the one way every stage writes.

A stage (export, audit, validate, report; ``analytics.contract.STAGES``) writes everything into
``OUT/.staging-<stage>-<run>/`` first, a folder claimed by its process. Only when all of it is
complete is it committed (:func:`commit`):

1. a journal, ``OUT/_publishing.json``, is written (atomically): it names the staging folder, the
   outputs staged and the manifests to write. Writing it is the commit point;
2. the stages' manifests (``_export.json``, ...) are removed;
3. their previous outputs move into a trash folder (also those this run does not write);
4. the new outputs move into place, the manifests are written, and the journal is removed.

A run that dies before the commit point leaves ``OUT`` as it was; one that dies after it leaves the
journal, and the next command that opens ``OUT`` finishes the swap (:func:`settle`), so readers see
the previous complete outputs or the new ones, never a mix. SIGINT and SIGTERM wait until a commit
is done, and none starts after a signal (:func:`refuse_commits`). ``segaudit run`` stages all four stages in one folder (``.staging-run-<run>``, itself laid
out like ``OUT``) and commits them as one unit (:func:`unit`): a killed ``run`` leaves the previous
complete set. Staging and trash folders of dead runs on this host are removed by the next run;
those of live runs and of other hosts are left alone (two runs may share ``OUT``).

Each manifest records the run ids of the stages it was built from (``built_from``), so a reader
can tell outputs that belong together from a mix.

Files are reached through a :class:`Store` (a pyarrow filesystem and a root), not ``os.path``.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow.fs as pafs

from analytics.contract import AUDIT, EXPORT, MANIFESTS, RECONCILE, REPORT, STAGES, VALIDATE, VALIDATION_DIR
from analytics.contract import REPORT_DIR
from analytics.contract.vocabulary import AUDIT_TABLES, EXPORT_TABLES, RECONCILE_TABLES, SUMMARY
from analytics.errors import StageMissing
from analytics.processes import alive

# What each stage owns under OUT: its previous outputs are replaced as a whole.
OUTPUTS = {
    EXPORT: EXPORT_TABLES,
    AUDIT: (*AUDIT_TABLES, SUMMARY),
    VALIDATE: (VALIDATION_DIR,),
    REPORT: (REPORT_DIR,),
    RECONCILE: RECONCILE_TABLES,
}
# The stage each stage reads: its manifest's run id goes into ``built_from``.
UPSTREAM = {EXPORT: None, AUDIT: EXPORT, VALIDATE: AUDIT, REPORT: AUDIT, RECONCILE: AUDIT}
OWNER = "_owner.json"
JOURNAL = "_publishing.json"
COMMANDS = {EXPORT: "segaudit export LOGDIR --out {out}", AUDIT: "segaudit audit {out}",
            VALIDATE: "segaudit validate {out}", REPORT: "segaudit report {out}",
            RECONCILE: "segaudit reconcile {out}"}


class Store:
    """A folder on a filesystem: local paths or any URI pyarrow opens (``s3://``, ``gs://``, ``hdfs://``).

    Only what publishing needs: list, test, create, move, delete, read and write small text files.
    Paths are relative to ``root`` and use ``/``.
    """

    def __init__(self, root: str):
        if "://" in root:
            self.fs, path = pafs.FileSystem.from_uri(root)
            self.root = path.rstrip("/")
            self.uri = root.rstrip("/")
        else:
            self.fs = pafs.LocalFileSystem()
            self.root = self.uri = os.path.abspath(root)

    def path(self, *parts: str) -> str:
        """The full path (or URI) of a path under the root, as Spark and pyarrow readers take it."""
        return posixpath.join(self.uri, *parts) if parts else self.uri

    def _p(self, name: str) -> str:
        return posixpath.join(self.root, name) if name else self.root

    def exists(self, name: str) -> bool:
        return self.fs.get_file_info(self._p(name)).type != pafs.FileType.NotFound

    def is_dir(self, name: str) -> bool:
        return self.fs.get_file_info(self._p(name)).type == pafs.FileType.Directory

    def is_file(self, name: str) -> bool:
        return self.fs.get_file_info(self._p(name)).type == pafs.FileType.File

    def names(self, name: str = "") -> list[str]:
        """The entries of a folder (names only); empty when it does not exist."""
        selector = pafs.FileSelector(self._p(name), allow_not_found=True)
        return sorted(posixpath.basename(info.path) for info in self.fs.get_file_info(selector))

    def size(self, name: str) -> int:
        """The bytes of a file, or of every file under a folder; 0 when it does not exist."""
        info = self.fs.get_file_info(self._p(name))
        if info.type == pafs.FileType.File:
            return info.size or 0
        if info.type != pafs.FileType.Directory:
            return 0
        selector = pafs.FileSelector(self._p(name), recursive=True)
        return sum(i.size or 0 for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File)

    def makedirs(self, name: str) -> None:
        self.fs.create_dir(self._p(name), recursive=True)

    def move(self, src: str, dst: str) -> None:
        """A rename: atomic on a local filesystem and HDFS."""
        self.fs.move(self._p(src), self._p(dst))

    def delete(self, name: str) -> None:
        """Remove a file or a folder with everything in it; nothing when it is gone already."""
        info = self.fs.get_file_info(self._p(name))
        if info.type == pafs.FileType.Directory:
            self.fs.delete_dir(self._p(name))
        elif info.type == pafs.FileType.File:
            self.fs.delete_file(self._p(name))

    def read_text(self, name: str) -> str:
        with self.fs.open_input_stream(self._p(name)) as f:
            return f.read().decode()

    def write_text(self, name: str, text: str) -> None:
        """Write a file whole: into a temporary name first, renamed over the target."""
        tmp = f"{name}.tmp-{uuid.uuid4().hex[:8]}"
        try:
            with self.fs.open_output_stream(self._p(tmp)) as f:
                f.write(text.encode())
            self.move(tmp, name)
        except BaseException:
            self.delete(tmp)
            raise


def new_run_id() -> str:
    """A run id: the UTC start time (sortable) and a random suffix (unique)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def read_manifest(out: str, stage: str) -> dict:
    """The manifest of a stage's complete output under ``out``; :class:`StageMissing` when there is none."""
    store = Store(out)
    name = MANIFESTS[stage]
    if not store.is_dir(""):
        raise StageMissing(f"{out}: no such directory")
    settle(store)
    if not store.is_file(name):
        raise StageMissing(f"{out} holds no complete {stage} (no {name}); run `{COMMANDS[stage].format(out=out)}` first")
    return json.loads(store.read_text(name))


@dataclass
class _Staging:
    """A staging folder under ``OUT`` claimed by this process: ``with`` creates it; leaving the
    block without a commit removes it and leaves ``OUT`` as it was."""

    store: Store
    run_id: str
    made_root: bool = False  # OUT did not exist before this run: a run that publishes nothing leaves none
    published: bool = field(default=False, init=False)

    @property
    def staging(self) -> str:
        raise NotImplementedError

    def __enter__(self):
        self.store.makedirs(self.staging)
        _claim(self.store, self.staging)
        return self

    def __exit__(self, *exc) -> None:
        if not self.published and not _committed(self.store, self.staging):
            self.store.delete(self.staging)
            if self.made_root and not self.store.names():
                self.store.delete("")


@dataclass
class Publication(_Staging):
    """One run of a stage, from its staging folder to its published outputs.

    ``with publication(out, stage) as p:`` creates and claims the staging folder; the body writes
    into ``p.path(name)`` and ends with ``p.publish(manifest)``; leaving the block in any other way
    (an error, Ctrl-C) removes the staging folder and leaves ``OUT`` as it was.
    """

    stage: str = ""
    built_from: dict = field(default_factory=dict)

    @property
    def staging(self) -> str:
        return f".staging-{self.stage}-{self.run_id}"

    def path(self, *parts: str) -> str:
        """Where the run writes an output (a Spark or pyarrow path)."""
        return self.store.path(self.staging, *parts)

    def written(self) -> list[str]:
        """The outputs staged so far (names starting with ``_`` are the run's scratch)."""
        return [n for n in self.store.names(self.staging) if not n.startswith(("_", "."))]

    def publish(self, manifest: dict) -> dict:
        """Commit the staged outputs; the manifest gets the run id, the stage and ``built_from``."""
        manifest = {"run_id": self.run_id, "stage": self.stage, "built_from": self.built_from,
                    **manifest, "finished_at_ms": int(time.time() * 1000)}
        commit(self.store, self.staging, {self.stage: manifest}, self.run_id)
        self.published = True
        return manifest


@dataclass
class Unit(_Staging):
    """Several stages staged in one folder laid out like ``OUT`` and committed together.

    ``with unit(out) as u:`` the body runs the stages with ``u.out`` as their ``OUT`` (each
    publishes into it as usual) and ends with ``u.publish()``; leaving the block in any other way
    removes the folder and leaves ``OUT`` as it was.
    """

    @property
    def staging(self) -> str:
        return f".staging-run-{self.run_id}"

    @property
    def out(self) -> str:
        """The folder the stages write to, as ``OUT`` for them."""
        return self.store.path(self.staging)

    def publish(self, stages: Iterable[str] = STAGES) -> dict[str, dict]:
        """Commit every stage's outputs and manifest at once; the manifests, by stage."""
        manifests = {s: read_manifest(self.out, s) for s in stages}
        commit(self.store, self.staging, manifests, self.run_id)
        self.published = True
        return manifests


def unit(out: str) -> Unit:
    """A new set of stages under ``out``, committed as one (``segaudit run``)."""
    store = Store(out)
    made = not store.is_dir("")
    store.makedirs("")
    settle(store)
    remove_abandoned(store)
    return Unit(store, new_run_id(), made_root=made)


def commit(store: Store, staging: str, manifests: dict[str, dict], run_id: str) -> None:
    """Swap the outputs staged in ``staging`` into the root, with ``manifests`` (by stage) last.

    Every output the stages own goes: those staged replace them, the others are removed. The
    journal is the commit point; SIGINT and SIGTERM wait until the swap is done.
    """
    staged = [n for n in store.names(staging) if not n.startswith(("_", "."))]
    owned = {n for stage in manifests for n in OUTPUTS[stage]}
    unknown = sorted(set(staged) - owned)
    if unknown:
        raise ValueError(f"the {', '.join(manifests)} stage does not own {', '.join(unknown)}")
    journal = {"staging": staging, "run_id": run_id, "outputs": staged, "manifests": manifests,
               "host": socket.gethostname(), "pid": os.getpid()}
    with _uninterrupted():
        if _refused:
            raise _refused[0]
        store.write_text(JOURNAL, json.dumps(journal, sort_keys=True))
        _roll_forward(store, journal)


_refused: list[BaseException] = []


def refuse_commits(reason: BaseException | None) -> None:
    """From now on every :func:`commit` raises ``reason`` instead; None allows commits again.

    For a signal's handler: it raises where the main thread happens to be, and when that is a
    finalizer or a weakref callback (Py4J releases Java objects in them), Python drops the
    exception and the stage runs on. Whatever it finishes, it must not publish."""
    _refused.clear()
    if reason is not None:
        _refused.append(reason)


def _committed(store: Store, staging: str) -> bool:
    """Whether a journal names ``staging``: past the commit point, only finishing the swap is right."""
    try:
        return json.loads(store.read_text(JOURNAL)).get("staging") == staging
    except (OSError, ValueError):
        return False


def settle(store: Store) -> None:
    """Finish the swap a dead run committed but did not complete (its journal is still there).

    :class:`StageMissing` while a live process is in the middle of one.
    """
    if not store.is_file(JOURNAL):
        return
    try:
        journal = json.loads(store.read_text(JOURNAL))
    except FileNotFoundError:  # finished meanwhile
        return
    if journal.get("pid") != os.getpid() and (journal.get("host") != socket.gethostname()
                                              or alive(int(journal.get("pid", 0)))):
        raise StageMissing(f"{store.uri} is being published by run {journal.get('run_id')} "
                           f"(pid {journal.get('pid')} on {journal.get('host')}); try again when it is done")
    _roll_forward(store, journal)


def _roll_forward(store: Store, journal: dict) -> None:
    """The swap a journal describes; each step can be repeated, so a swap cut short is finished by
    running it again."""
    staging, staged, manifests = journal["staging"], set(journal["outputs"]), journal["manifests"]
    for stage in manifests:
        store.delete(MANIFESTS[stage])
    trash = f".trash-{journal['run_id']}"
    store.makedirs(trash)
    _claim(store, trash)
    for stage in manifests:
        for name in OUTPUTS[stage]:
            incoming = name in staged and store.exists(f"{staging}/{name}")
            if store.exists(name) and (incoming or name not in staged):  # an earlier run's output
                store.delete(f"{trash}/{name}")
                store.move(name, f"{trash}/{name}")
            if incoming:
                store.move(f"{staging}/{name}", name)
    for stage, manifest in manifests.items():
        store.write_text(MANIFESTS[stage], json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    store.delete(trash)
    store.delete(staging)
    store.delete(JOURNAL)


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


def publication(out: str, stage: str, *, built_from: dict | None = None) -> Publication:
    """A new run of ``stage`` under ``out``: ``out`` is created, abandoned runs are cleared.

    ``built_from`` defaults to the run id of the upstream stage's manifest (the export for an
    audit, the audit for a validation or a report); :class:`StageMissing` when there is none.
    """
    store = Store(out)
    made = not store.is_dir("")
    store.makedirs("")
    settle(store)
    remove_abandoned(store)
    if built_from is None:
        upstream = UPSTREAM[stage]
        built_from = {upstream: read_manifest(out, upstream)["run_id"]} if upstream else {}
    return Publication(store, new_run_id(), made_root=made, stage=stage, built_from=built_from)


def _claim(store: Store, folder: str) -> None:
    """Mark a staging or trash folder with the process that owns it."""
    store.write_text(f"{folder}/{OWNER}", json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))


def remove_abandoned(store: Store) -> list[str]:
    """Remove the staging and trash folders of runs that died (their process on this host is gone)."""
    removed = []
    for name in store.names():
        if not name.startswith((".staging-", ".trash-")):
            continue
        try:
            owner = json.loads(store.read_text(f"{name}/{OWNER}"))
        except (OSError, ValueError):
            continue
        if owner.get("host") == socket.gethostname() and not alive(int(owner.get("pid", 0))):
            store.delete(name)
            removed.append(name)
    return removed




def out_of_step(out: str, stages: Iterable[str]) -> str | None:
    """Why the published ``stages`` under ``out`` do not belong together, or None when they do.

    Each stage's ``built_from`` must name the run id its upstream stage has now: an audit of an
    older export, or a validation of an older audit, is stale.
    """
    manifests = {s: read_manifest(out, s) for s in stages}
    for stage, manifest in manifests.items():
        upstream = UPSTREAM[stage]
        if upstream is None:
            continue
        current = manifests.get(upstream) or read_manifest(out, upstream)
        built = (manifest.get("built_from") or {}).get(upstream)
        if built is not None and built != current["run_id"]:
            return (f"{out}: the {stage} was built from {upstream} run {built}, but the {upstream} there is run "
                    f"{current['run_id']}; run `{COMMANDS[stage].format(out=out)}` again")
    return None
