"""Publishing a stage's outputs under ``OUT`` atomically: the one way every stage writes.

A stage (export, audit, validate, report; ``analytics.contract.STAGES``) writes everything into
``OUT/.staging-<stage>-<run>/`` first, a folder claimed by its process. Only when all of it is
complete does :meth:`Publication.publish`:

1. remove the stage's manifest (``_export.json``, ...) — from here on readers see no complete stage;
2. move the stage's previous outputs into a trash folder (also those this run does not write);
3. move the new outputs into place;
4. write the manifest last, atomically (a temporary file renamed over it).

A run that dies before step 1 leaves the previous outputs as they were; one that dies during the
swap leaves no manifest, which every reader of ``OUT`` requires (:func:`read_manifest`), so nothing
half-written looks complete. Staging and trash folders of dead runs on this host are removed by
the next run; those of live runs and of other hosts are left alone (two runs may share ``OUT``).

Each manifest records the run ids of the stages it was built from (``built_from``), so a reader
can tell outputs that belong together from a mix.

Files are reached through a :class:`Store` (a pyarrow filesystem and a root), not ``os.path``.
"""

from __future__ import annotations

import json
import os
import posixpath
import socket
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow.fs as pafs

from analytics.contract import AUDIT, EXPORT, MANIFESTS, REPORT, REPORT_DIR, VALIDATE, VALIDATION_DIR
from analytics.contract.vocabulary import AUDIT_TABLES, EXPORT_TABLES, SUMMARY
from analytics.errors import StageMissing

# What each stage owns under OUT: its previous outputs are replaced as a whole.
OUTPUTS = {
    EXPORT: EXPORT_TABLES,
    AUDIT: (*AUDIT_TABLES, SUMMARY),
    VALIDATE: (VALIDATION_DIR,),
    REPORT: (REPORT_DIR,),
}
# The stage each stage reads: its manifest's run id goes into ``built_from``.
UPSTREAM = {EXPORT: None, AUDIT: EXPORT, VALIDATE: AUDIT, REPORT: AUDIT}
OWNER = "_owner.json"
COMMANDS = {EXPORT: "segaudit export LOGDIR --out {out}", AUDIT: "segaudit audit {out}",
            VALIDATE: "segaudit validate {out}", REPORT: "segaudit report {out}"}


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
        with self.fs.open_output_stream(self._p(tmp)) as f:
            f.write(text.encode())
        self.move(tmp, name)


def new_run_id() -> str:
    """A run id: the UTC start time (sortable) and a random suffix (unique)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def read_manifest(out: str, stage: str) -> dict:
    """The manifest of a stage's complete output under ``out``; :class:`StageMissing` when there is none."""
    store = Store(out)
    name = MANIFESTS[stage]
    if not store.is_dir(""):
        raise StageMissing(f"{out}: no such directory")
    if not store.is_file(name):
        raise StageMissing(f"{out} holds no complete {stage} (no {name}); run `{COMMANDS[stage].format(out=out)}` first")
    return json.loads(store.read_text(name))


@dataclass
class Publication:
    """One run of a stage, from its staging folder to its published outputs.

    ``with publication(out, stage) as p:`` creates and claims the staging folder; the body writes
    into ``p.path(name)`` and ends with ``p.publish(manifest)``; leaving the block in any other way
    (an error, Ctrl-C) removes the staging folder and leaves ``OUT`` as it was.
    """

    store: Store
    stage: str
    run_id: str
    built_from: dict
    published: bool = False

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
        """Swap the staged outputs in; the manifest (with run id, stage and built_from) goes last."""
        store, final = self.store, MANIFESTS[self.stage]
        manifest = {"run_id": self.run_id, "stage": self.stage, "built_from": self.built_from,
                    **manifest, "finished_at_ms": int(time.time() * 1000)}
        staged = self.written()
        unknown = sorted(set(staged) - set(OUTPUTS[self.stage]))
        if unknown:
            raise ValueError(f"the {self.stage} stage does not own {', '.join(unknown)}")
        store.delete(final)
        trash = f".trash-{self.stage}-{self.run_id}"
        store.makedirs(trash)
        _claim(store, trash)
        for name in OUTPUTS[self.stage]:  # every output of an earlier run goes, also those this run has not
            if store.exists(name):
                store.move(name, f"{trash}/{name}")
        for name in staged:
            store.move(f"{self.staging}/{name}", name)
        store.write_text(final, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        store.delete(trash)
        store.delete(self.staging)
        self.published = True
        return manifest

    def __enter__(self) -> Publication:
        self.store.makedirs(self.staging)
        _claim(self.store, self.staging)
        return self

    def __exit__(self, *exc) -> None:
        if not self.published:
            self.store.delete(self.staging)


def publication(out: str, stage: str, *, built_from: dict | None = None) -> Publication:
    """A new run of ``stage`` under ``out``: ``out`` is created, abandoned runs are cleared.

    ``built_from`` defaults to the run id of the upstream stage's manifest (the export for an
    audit, the audit for a validation or a report); :class:`StageMissing` when there is none.
    """
    store = Store(out)
    store.makedirs("")
    remove_abandoned(store)
    if built_from is None:
        upstream = UPSTREAM[stage]
        built_from = {upstream: read_manifest(out, upstream)["run_id"]} if upstream else {}
    return Publication(store, stage, new_run_id(), built_from)


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
        if owner.get("host") == socket.gethostname() and not _alive(int(owner.get("pid", 0))):
            store.delete(name)
            removed.append(name)
    return removed


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
