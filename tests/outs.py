"""OUTs in tests: copies that stay whole, the folder a published table is in, forged manifests.

``OUT/<table>`` on a local disk is a link into the latest commit's run folder, and readers resolve the
commit, not the link: a test that forges a table or a manifest changes what the commit names."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from analytics.contract import MANIFESTS
from analytics.publish import commits, published


def copy_out(source, target, without: tuple[str, ...] = ()) -> str:
    """A copy of an OUT (its links kept as links), without the stages named in ``without``."""
    shutil.copytree(source, target, symlinks=True)
    if without:
        store = commits.Store(str(target))
        version = commits.versions(store)[-1]
        doc = json.loads(store.read_text(commits.commit_name(version)))
        for stage in without:
            entry = doc["stages"].pop(stage, None)
            for name in [*(entry or {}).get("outputs", []), MANIFESTS[stage]]:
                if os.path.islink(Path(target, name)):
                    os.unlink(Path(target, name))
        store.write_text(commits.commit_name(version), json.dumps(doc))
    return str(target)


def table_dir(out, name: str) -> Path:
    """The folder (or file) a published output is in."""
    return Path(published(str(out)).path(name))


def published_table(out, name: str):
    """A published table as pyarrow reads it (its Hive folders' columns too), from a bucket or a disk."""
    import pyarrow.dataset as ds

    view = published(str(out))
    return ds.dataset(view._p(name), filesystem=view.fs, format="parquet", partitioning="hive").to_table()


def edit_manifest(out, stage: str, **changes) -> None:
    """Change fields of a published stage's manifest, where readers read it: the latest commit."""
    store = commits.Store(str(out))
    version = commits.versions(store)[-1]
    doc = json.loads(store.read_text(commits.commit_name(version)))
    doc["stages"][stage]["manifest"].update(changes)
    store.write_text(commits.commit_name(version), json.dumps(doc))
