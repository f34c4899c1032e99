"""The audit's Parquet tables read with pyarrow: the forensic answers start no Spark and no JVM.

Every read filters before it projects. ``batch_verdicts`` is written partitioned by topic and
each file sorted by (topic, history, file) (``analytics.audit.job``): opening one topic's folder
never lists or opens another's, and a filter on partition and offsets skips row groups by their
statistics. A query for the first rows in some order scans only the order column (streamed, a
record batch at a time) and then fetches the few rows it picked with a selective filter, so no
wide column of a large table is decoded for rows that are not shown.
"""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from analytics.contract import AUDIT, EXPORT, SUMMARY
from analytics.errors import OutOfStep, UsageError, unknown
from analytics.publish import AsOf, published

VERDICTS = "batch_verdicts"
TOPIC_FOLDER = "topic="  # the Hive-style folder of each topic of batch_verdicts
# Columns of batch_verdicts newer than some audits on disk: read as null from those.
LATER_COLUMNS = ("expired_offset", "conflict_offset", "topic_id", "topic_deleted")  # None where an older audit has none


class NotFound(UsageError):
    """The audit holds nothing for the question asked (one line, exit 2)."""


def log_dirs(files: pa.Array, levels: int = 2) -> pa.Array:
    """``analytics.contract.log_dir_of`` over an array of file paths."""
    pattern = "^(.*)" + "/[^/]*" * levels + "$"
    return pc.if_else(pc.match_substring_regex(files, pattern),
                      pc.replace_substring_regex(files, pattern, r"\1"), "")


def in_folder(folder: str) -> pc.Expression:
    """A filter on ``file``: the segment files of one partition folder."""
    return pc.match_substring_regex(pc.field("file"), "^" + re.escape(folder) + "/[^/]*$")


def in_log_dir(log_dir: str) -> pc.Expression:
    """A filter on ``file``: the segment files of one log dir (exactly: not of a log dir nested in it)."""
    return pc.match_substring_regex(pc.field("file"), "^" + re.escape(log_dir) + "/[^/]*/[^/]*$")


class Audit:
    """The tables of the complete, consistent audit under ``out`` (at its commit ``as_of``, or the latest).

    Raises :class:`~analytics.errors.StageMissing` when the audit or the export it was built from
    is missing, :class:`~analytics.errors.OutOfStep` when the audit is of another export.
    """

    def __init__(self, out: str, as_of: AsOf | None = None):
        self.store = published(out, as_of)  # one commit, resolved once: every table of the same version
        why = self.store.out_of_step((AUDIT, EXPORT), out)
        if why:
            raise OutOfStep(why)
        self.config = json.loads(self.store.read_text(SUMMARY))["configuration"]

    def topics(self) -> list[str]:
        """The audited topics: the folders of ``batch_verdicts``."""
        return [n[len(TOPIC_FOLDER):] for n in self.store.names(VERDICTS) if n.startswith(TOPIC_FOLDER)]

    def require_topic(self, topic: str) -> None:
        if not self.store.is_dir(f"{VERDICTS}/{TOPIC_FOLDER}{topic}"):
            raise NotFound(unknown("topic", topic, self.topics()))

    def verdicts(self, topic: str, dictionary: tuple[str, ...] = ()) -> Table:
        """``batch_verdicts`` of one topic (its folder only); the string columns named in ``dictionary``
        are read dictionary-encoded (each distinct value decoded once: ``file`` repeats a path a row)."""
        self.require_topic(topic)
        parquet = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=dictionary))
        return Table(ds.dataset(self.store._p(f"{VERDICTS}/{TOPIC_FOLDER}{topic}"), filesystem=self.store.fs,
                                format=parquet), topic=topic)

    def table(self, name: str) -> Table | None:
        """A table that is not partitioned; None when the audit holds none of that name."""
        if not self.store.is_dir(name):
            return None
        return Table(ds.dataset(self.store._p(name), filesystem=self.store.fs, format="parquet"))


class Table:
    """One Parquet dataset, read as lists of dicts. ``topic`` is the value of the Hive partition
    column of a topic folder, which its files do not hold."""

    def __init__(self, dataset: ds.Dataset, topic: str | None = None):
        self.dataset = dataset
        self.topic = topic
        self.columns = dataset.schema.names

    def dicts(self, table: pa.Table, columns: list[str]) -> list[dict]:
        """Rows of ``table`` (read from this dataset) as dicts of ``columns``, with the topic of a topic
        folder and None for a column newer than the files."""
        fixed = {"topic": self.topic} if self.topic is not None else {}
        fixed |= {c: None for c in LATER_COLUMNS if c not in self.columns}
        return [{c: fixed[c] if c in fixed else r[c] for c in columns} for r in table.to_pylist()]

    def _stored(self, columns) -> list[str]:
        return [c for c in columns if c in self.columns]

    def read(self, where: pc.Expression | None, columns: list[str] | None = None) -> pa.Table:
        """The rows matching ``where``, with ``columns`` (those the files hold)."""
        return self.dataset.to_table(columns=self._stored(columns or self.columns), filter=where)

    def rows(self, where: pc.Expression | None, columns: list[str] | None = None) -> list[dict]:
        """The rows matching ``where`` as dicts of ``columns``."""
        columns = columns or self.columns
        return self.dicts(self.read(where, columns), columns)

    def first(self, where: pc.Expression, by: str, k: int = 1, descending: bool = False,
              columns: list[str] | None = None, then: tuple[str, ...] = ("file", "file_position")) -> list[dict]:
        """The first ``k`` rows matching ``where`` ordered by ``by``, ties by ``then`` (in the same
        direction: of equal pauses, the latest comes first).

        Only ``by`` is scanned to pick the rows (a batch at a time, keeping ``k`` values); the rows
        are then fetched by those values, which row-group statistics make cheap when ``by`` is an
        offset of a sorted file.
        """
        if k < 1:
            return []
        pick = pc.top_k_unstable if descending else pc.bottom_k_unstable
        picked = pa.array([], self.dataset.schema.field(by).type)
        for batch in self.dataset.to_batches(columns=[by], filter=where & pc.field(by).is_valid()):
            values = pa.concat_arrays([picked, batch.column(0)])
            picked = values.take(pick(values, k=min(k, len(values))))
        if len(picked) == 0:
            return []
        lo, hi = pc.min_max(picked).values()
        fetch = where & (pc.field(by) >= lo) & (pc.field(by) <= hi) & pc.field(by).isin(picked.unique())
        rows = self.rows(fetch, list(dict.fromkeys([*(columns or self.columns), by, *then])))
        rows.sort(key=lambda r: (r[by], *(r[c] for c in then)), reverse=descending)
        wanted = columns or self.columns
        return [{c: r[c] for c in wanted} for r in rows[:k]]
