"""Deleted incarnations: the partition folders of a topic the cluster deleted, which linger in a log
dir for ``file.delete.delay.ms`` as ``<topic>-<p>.<uid>-delete``.

A topic deleted and created again under its name is another topic with another id (KIP-516); each
incarnation is already a history of its own (``contract.HISTORY_KEY``). This module decides which
ids the data shows were *deleted*, on evidence alone:

1. the KRaft metadata log removed the id: a ``RemoveTopicRecord`` for it in the records after the
   snapshot the export read (:meth:`analytics.kafka.metadata.ClusterConfigs.topic_ids`);
2. a ``-delete`` folder of an id that no metadata log in the export holds among its topics (a
   removal older than the snapshot leaves no record of its own), where some metadata log was read;
3. a ``-delete`` folder of an id while a live folder of the same topic name holds another id: the
   name belongs to a newer incarnation.

An id that a live folder (no suffix) holds is never deleted by rules 2 and 3: a replica moved to
another log dir or broker leaves a ``-delete`` folder of the live id, which is a replica, not a
deleted topic. Rule 1 stands on its own: the cluster removed the topic, whatever folder is left.

Inside the audit a deleted incarnation's histories are keyed by the id, ``APART`` and ``DELETED``
(:func:`marked`); the outputs show the id alone and ``topic_deleted`` true (``columns.conform``).
"""

from __future__ import annotations

import posixpath

from analytics.contract import APART, DELETED
from analytics.kafka.discovery import parse_partition_dir

LEFTOVER = "delete"  # the suffix of a folder the broker renamed for deletion


def deleted_incarnations(folders: dict[str, str | None] | None, metadata: dict | None) -> dict[str, dict]:
    """Each deleted topic id among ``folders`` (partition folder -> its topic id, as
    :func:`analytics.audit.audit_plan.folder_topic_ids` gives them) with its topic name, its folders,
    the evidence and when the controller removed it (``deleted_at_ms``: its ``RemoveTopicRecord``'s
    timestamp, else None), on the export's metadata logs (``metadata``: the manifest's
    ``cluster_metadata``, per log dir).

    >>> removed = {"m": {"topic_ids": {"live": {"NEW": "t"}, "removed": {"OLD": {"name": "t", "offset": 41, "timestamp": 9}}}}}
    >>> folders = {"/d/t-0": "NEW", "/d/t-0.9fcb5b7f1ba24c1a8d5d8ebae6cafb6b-delete": "OLD", "/e/t-0.ab5b7f1ba24c1a8d5d8ebae6cafb6b99-delete": "NEW"}
    >>> deleted_incarnations(folders, removed)
    {'OLD': {'topic': 't', 'folders': 1, 'evidence': 'the metadata log removed it at offset 41', 'deleted_at_ms': 9}}
    >>> deleted_incarnations({"/d/t-0": "NEW", "/d/t-0.9fcb5b7f1ba24c1a8d5d8ebae6cafb6b-delete": "OLD"}, {})["OLD"]["evidence"]
    'its -delete folder beside the name held by topic id NEW'
    >>> deleted_incarnations({"/d/t-0.9fcb5b7f1ba24c1a8d5d8ebae6cafb6b-delete": "OLD"}, {"m": {"topic_ids": {"live": {}, "removed": {}}}})
    {'OLD': {'topic': 't', 'folders': 1, 'evidence': 'its -delete folder, an id no metadata log holds', 'deleted_at_ms': None}}
    >>> deleted_incarnations({"/d/t-0.9fcb5b7f1ba24c1a8d5d8ebae6cafb6b-delete": "OLD"}, {})  # no evidence: not called deleted
    {}
    """
    logs = [note["topic_ids"] for note in (metadata or {}).values() if (note or {}).get("topic_ids")]
    removed = {topic_id: entry for log in logs for topic_id, entry in log["removed"].items()}
    known = {topic_id for log in logs for topic_id in log["live"]}
    parsed = {folder: (parse_partition_dir(posixpath.basename(folder)), (topic_id or "").partition(APART)[0])
              for folder, topic_id in (folders or {}).items()}
    parsed = {folder: (p, topic_id) for folder, (p, topic_id) in parsed.items() if p is not None and topic_id}
    live = {}  # topic name -> the ids its live folders hold
    for (topic, _partition, suffix), topic_id in parsed.values():
        if suffix is None:
            live.setdefault(topic, set()).add(topic_id)
    held = set().union(*live.values()) if live else set()
    found: dict[str, dict] = {}
    for ((topic, _partition, suffix), topic_id) in parsed.values():
        evidence, when = None, None
        if topic_id in removed:
            evidence = f"the metadata log removed it at offset {removed[topic_id]['offset']}"
            when = removed[topic_id].get("timestamp")
        elif suffix == LEFTOVER and topic_id not in held:
            others = sorted(live.get(topic, set()) - {topic_id})
            if others:
                evidence = f"its -delete folder beside the name held by topic id {others[0]}"
            elif logs and topic_id not in known:
                evidence = "its -delete folder, an id no metadata log holds"
        if evidence:
            entry = found.setdefault(topic_id, {"topic": topic, "folders": 0, "evidence": evidence,
                                                "deleted_at_ms": when})
            entry["folders"] += 1
    return found


def ended(identity: dict | None) -> dict[str, int | None]:
    """Each deleted incarnation's id with the time its log ended (``deleted_at_ms``, None: not known),
    from the plan's ``identity`` (:func:`analytics.audit.audit_plan.folder_identity`).

    >>> ended({"deleted_incarnations": {"OLD": {"deleted_at_ms": 9}}}), ended(None)
    ({'OLD': 9}, {})
    """
    return {topic_id: e.get("deleted_at_ms")
            for topic_id, e in ((identity or {}).get("deleted_incarnations") or {}).items()}


def marked(topic_id: str) -> str:
    """The key inside the audit of a deleted incarnation's histories.

    >>> marked("OLD")
    'OLD@deleted'
    """
    return f"{topic_id}{APART}{DELETED}"


def is_marked(topic_id: str | None) -> bool:
    """Whether an id inside the audit is a deleted incarnation's (:func:`marked`)."""
    return (topic_id or "").endswith(APART + DELETED)


def with_deleted(folders: dict[str, str | None] | None, deleted: dict[str, dict]) -> dict[str, str | None] | None:
    """``folders`` with each deleted incarnation's folders keyed :func:`marked` (a folder kept apart
    keeps its own key: it sits beside a live folder of its id, so its id is not deleted by rule 2 or 3).

    >>> with_deleted({"/d/t-0": "NEW", "/d/t-0.9fcb5b7f1ba24c1a8d5d8ebae6cafb6b-delete": "OLD"}, {"OLD": {}})
    {'/d/t-0': 'NEW', '/d/t-0.9fcb5b7f1ba24c1a8d5d8ebae6cafb6b-delete': 'OLD@deleted'}
    """
    if not folders or not deleted:
        return folders
    return {folder: marked(topic_id) if topic_id in deleted else topic_id for folder, topic_id in folders.items()}


def described(deleted: dict[str, dict], skipped: bool) -> str | None:
    """One line for an operator when the export holds a deleted incarnation, else None.

    >>> described({"OLD": {"topic": "t", "folders": 3, "evidence": "the metadata log removed it at offset 41"}}, False)
    'a deleted incarnation of t (topic id OLD: the metadata log removed it at offset 41), 3 partition folders: audited apart, rows marked topic_deleted (--skip-deleted-topics leaves them out)'
    """
    if not deleted:
        return None
    what = ", ".join(f"{e['topic']} (topic id {topic_id}: {e['evidence']})" for topic_id, e in sorted(deleted.items()))
    folders = sum(e["folders"] for e in deleted.values())
    many = "deleted incarnations" if len(deleted) > 1 else "a deleted incarnation"
    done = ("left out (--skip-deleted-topics)" if skipped
            else "audited apart, rows marked topic_deleted (--skip-deleted-topics leaves them out)")
    return f"{many} of {what}, {folders} partition folder{'s' if folders != 1 else ''}: {done}"
