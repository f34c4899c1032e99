"""``segaudit dump-log`` against Kafka's own DumpLogSegments, line for line (docs/real-broker.md).

Both tool versions of tests/kafka_cluster.py (the 4.x line, whose tool is the Java port, and 3.9.2,
the Scala tool) dump every ``.log`` and ``.snapshot`` file of the corpus, the generated sample
``data/mixed`` (``.txnindex`` files, legacy wrappers, CRC failures, torn tails) and files written
here for the cases neither holds, with the flags segaudit mirrors: shallow, ``--deep-iteration``,
``--print-data-log`` (and ``--skip-record-metadata``). segaudit prints with ``--kafka-version``
set to the broker's. Then ``segaudit export --input-format dump-log`` over the tool's own text
must give the binary export's ``batches`` rows.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analytics.kafka.dumplog import DumpRecord, parse_dump
from analytics.kafka.errors import CRC_MISMATCH, STOPS_FILE
from analytics.contract import READ_SCHEMAS as TABLE_SCHEMAS
from analytics.kafka.logdir import read_segment
from analytics.kafka.model import Batch, ParseError
from analytics.kafka.reader import batches_from_arrow
from analytics.kafka.util import java_utf8
from tests.conftest import REPO
from tests.dumplog_oracle import (
    DATA,
    DATA_ONLY,
    DEEP,
    DUMPED_SUFFIXES,
    SHALLOW,
    compare,
    compare_with_kafka,
    dump_log_command,
    kafka_dump,
    write_edge_cases,
)
from tests.kafka_cluster import UNAVAILABLE, VERSIONS, JarsUnavailable
from tests.outs import table_dir

pytestmark = pytest.mark.broker
SAMPLE = REPO / "data" / "mixed"
FLAGS = {"shallow": SHALLOW, "deep": DEEP, "data": DATA, "data-only": DATA_ONLY}


@pytest.fixture(scope="module", params=VERSIONS)
def version(request) -> str:
    """A broker version whose DumpLogSegments resolves, or a skip that says why it does not."""
    try:
        dump_log_command(request.param)
    except (JarsUnavailable, subprocess.TimeoutExpired) as e:
        pytest.skip(f"{UNAVAILABLE}: {e}")
    return request.param


def dumped_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in DUMPED_SUFFIXES)


def check(result, record_property) -> None:
    print(result.summary())
    record_property(" ".join(result.flags) or "shallow", result.summary())
    assert result.differences == [], "\n".join(str(d) for d in result.differences[:20])


@pytest.mark.corpus
@pytest.mark.parametrize("flags", ["shallow", "deep", "data"])
def test_corpus_dumps_equal_kafkas(version, flags, corpus_dir, record_property):
    files = dumped_files(corpus_dir)
    result = compare(version, files, FLAGS[flags])
    check(result, record_property)
    assert result.tool_failures == {}
    assert result.files_compared == len(files) and result.lines_compared > len(files)


@pytest.mark.corpus
def test_kafkas_print_data_log_text_parses_to_the_binary_readers_rows(version, corpus_dir):
    """Keys and payloads printed over several lines, ending with "\r", holding U+FFFD: all read back."""
    files = dumped_files(corpus_dir)  # the same run as the "data" comparison above, kept by kafka_dump
    dumps, failures = kafka_dump(version, [str(f) for f in files], DATA)
    assert failures == {}
    batches, records, errors = {}, {}, []
    for path in files:
        for row in parse_dump(dumps[str(path)], source=str(path)):
            if isinstance(row, Batch):
                # topic and partition come from the path in both readers: the export test compares them
                row = replace(row, base_timestamp=None, topic="", partition=-1)
                batches.setdefault(row.file, []).append(row)
            elif isinstance(row, DumpRecord) and not batches[row.file][-1].is_control:
                r = row.record
                records.setdefault(row.file, []).append((r.offset, r.timestamp, r.sequence, r.key, r.value))
            elif isinstance(row, ParseError):
                errors.append(row)
    assert errors == []
    compared = 0
    for path in (f for f in files if f.suffix == ".log"):
        read = read_segment(path, records=True)
        binary = [replace(b, base_timestamp=None)
                  for rb in read.batches.to_batches() for b in batches_from_arrow(rb)]
        # The text decodes keys and payloads as the tool's StringDecoder does.
        printed = [(r["offset"], r["timestamp"], r["sequence"], _printed(r["key"]), _printed(r["value"]))
                   for r in read.records.to_pylist() if not r["is_control"]]
        assert batches.get(str(path), []) == binary, path
        assert records.get(str(path), []) == printed, path
        compared += len(printed)
    print(f"Kafka {version}: {compared} records read back from --print-data-log text")
    assert compared > 200_000


def _printed(data: bytes | None) -> bytes | None:
    return None if data is None else java_utf8(data).encode("utf-8")


@pytest.mark.parametrize("flags", ["deep", "data"])
def test_generated_sample_dumps_equal_kafkas(version, flags, record_property):
    files = dumped_files(SAMPLE)
    assert {f.suffix for f in files} == {".log", ".snapshot", ".txnindex"}
    result = compare(version, files, FLAGS[flags])
    check(result, record_property)
    # The tool throws only on entries the binary reader finds broken (the lines it printed before are
    # compared all the same): a CRC failure whose records do not decode, a zero-filled tail.
    broken = {str(f) for f in files if f.suffix == ".log"
              and any(e.error_kind == CRC_MISMATCH or e.error_kind in STOPS_FILE
                      for e in read_segment(f).errors)}
    assert set(result.tool_failures) <= broken
    assert result.files_compared == len(files) - len(result.tool_failures)


@pytest.mark.parametrize("flags", list(FLAGS))
def test_edge_cases_dump_equal_kafkas(version, flags, tmp_path, record_property):
    files = write_edge_cases(tmp_path)
    result = compare(version, files, FLAGS[flags])
    check(result, record_property)
    # One value the tool cannot decode (a KRaft voters record of one byte) makes it throw, when it
    # decodes control records: with record metadata.
    throws = FLAGS[flags] in (DEEP, DATA)
    assert list(result.tool_failures) == ([str(tmp_path / "__cluster_metadata-0/00000000000000000006.log")]
                                          if throws else [])
    assert result.files_compared == len(files) - throws


def test_compare_with_kafka_returns_counts_and_differences(version, tmp_path):
    files = [f for f in write_edge_cases(tmp_path) if f.name != "00000000000000000006.log"]
    compared, lines, differences = compare_with_kafka(version, files)
    assert (compared, differences) == (len(files), []) and lines > len(files)
    # A file the tool throws on counts as a difference: a broker's own files should never make it throw.
    failing = tmp_path / "__cluster_metadata-0/00000000000000000006.log"
    compared, _, differences = compare_with_kafka(version, [failing])
    assert compared == 0 and [d.file for d in differences] == [str(failing)]
    assert "BufferUnderflowException" in differences[0].kafka


# --- export --input-format dump-log over the tool's own text: the binary export's batches rows.
def _batches(out: str) -> list[tuple]:
    # every column but base_timestamp, the only one no dump prints
    names = [n for n in TABLE_SCHEMAS["batches"].names if n != "base_timestamp"]
    table = pq.read_table(str(table_dir(out, "batches")))
    return sorted(tuple(row[n] for n in names) for row in table.to_pylist())


@pytest.mark.spark
@pytest.mark.corpus
def test_export_of_kafkas_dump_equals_the_binary_export(version, spark, corpus_dir, corpus_export,
                                                         tmp_path, record_property):
    from analytics.export import export

    segments = [str(p) for p in sorted(corpus_dir.rglob("*.log"))]
    dumps, failures = kafka_dump(version, segments, DEEP)
    assert failures == {}
    folder = tmp_path / "dumps"
    folder.mkdir()
    per_file = 32  # several text files, so that several tasks read them
    for start in range(0, len(segments), per_file):
        lines = [line for path in segments[start:start + per_file] for line in dumps[path]]
        text = "\n".join(lines) + "\n"
        (folder / f"kafka-{version}-{start // per_file:03d}.txt").write_text(text, encoding="utf-8")
    out = str(tmp_path / "out")
    result = export(spark, [str(folder)], out, input_format="dump-log")
    assert result.rows["parse_errors"] == 0
    from_text, binary = _batches(out), _batches(corpus_export[1])
    record_property("batches", len(binary))
    print(f"Kafka {version}: {len(from_text)} batches rows from the dump text, "
          f"{len(binary)} from the segments")
    assert len(from_text) == len(binary) == result.rows["batches"]
    assert from_text == binary
