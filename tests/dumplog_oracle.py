"""Kafka's own DumpLogSegments as the oracle of ``segaudit dump-log`` (docs/real-broker.md).

``compare_with_kafka(version, files)`` runs the real tool of a broker ``version`` (the jars of
``tests/kafka_cluster.py``) and ``segaudit dump-log --kafka-version VERSION`` over the same files
with the same flags, and compares their stdout line for line. It returns
``(files_compared, lines_compared, differences)``; any test can call it, for instance on the
segments a real broker just wrote. :func:`compare` returns the whole :class:`Comparison`.

The JVM starts once for many files (``--files a,b,c``): a run takes up to :data:`FILES_PER_RUN`
files. Where the tool throws on a file (it stops at the first batch it cannot decode), the files
after it go to a new run, and that file is a *tool failure*: its text is not compared.

The tool's stderr (its report of non-consecutive offsets, SLF4J notices) is not compared: only
stdout is the dump. Both sides write UTF-8 (the JVM is told so, whatever the locale).

Differences that are not bugs would each be an :class:`Excuse` in :data:`EXCUSES`, a narrow rule
with its reason, also listed in docs/real-broker.md; there are none today.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import io
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.kafka_cluster import dump_log_command as _dump_log_command

DEEP = ("--deep-iteration",)
SHALLOW: tuple[str, ...] = ()
DATA = ("--print-data-log",)
DATA_ONLY = ("--print-data-log", "--skip-record-metadata")
# The suffixes DumpLogSegments dumps that segaudit dump-log prints too (.index and .timeindex it does not).
DUMPED_SUFFIXES = (".log", ".checkpoint", ".snapshot", ".txnindex")
FILES_PER_RUN = 1000
COMMAND_CHARS = 100_000  # below any ARG_MAX
JVM_UTF8 = ("-Dfile.encoding=UTF-8", "-Dstdout.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8")
RUN_TIMEOUT = 600


@functools.cache
def dump_log_command(version: str) -> tuple[str, ...]:
    """``tests.kafka_cluster.dump_log_command``, resolved once per process (resolving may run Maven)."""
    return tuple(_dump_log_command(version))


@dataclass(frozen=True)
class Difference:
    """One line where the two dumps of ``file`` differ; ``line`` counts from its ``Dumping`` line (1).

    ``kafka`` or ``segaudit`` is None where that side has no such line.
    """

    file: str
    line: int
    kafka: str | None
    segaudit: str | None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}\n  kafka:    {self.kafka!r}\n  segaudit: {self.segaudit!r}"


@dataclass(frozen=True)
class Excuse:
    """A documented difference that is not a bug: ``applies(version, flags, kafka_line, segaudit_line)``."""

    name: str
    reason: str
    applies: Callable[[str, tuple[str, ...], str, str], bool]


# Every excuse is listed with its reason in docs/real-broker.md. None is needed today: every line
# of every dumped file is equal for both versions.
EXCUSES: tuple[Excuse, ...] = ()


@dataclass
class Comparison:
    version: str
    flags: tuple[str, ...]
    files_compared: int = 0
    lines_compared: int = 0
    differences: list[Difference] = field(default_factory=list)
    excused: list[tuple[str, Difference]] = field(default_factory=list)
    tool_failures: dict[str, str] = field(default_factory=dict)  # file -> the tool's exception

    def summary(self) -> str:
        flags = " ".join(self.flags) or "(no flags)"
        return (f"Kafka {self.version} {flags}: {self.files_compared} files, "
                f"{self.lines_compared} lines compared, {len(self.differences)} differences, "
                f"{len(self.excused)} excused, {len(self.tool_failures)} files the tool failed on")


def compare_with_kafka(version: str, files: Iterable,
                       flags: Sequence[str] = DEEP) -> tuple[int, int, list[Difference]]:
    """``(files_compared, lines_compared, differences)``: ``segaudit dump-log`` against ``version``'s tool.

    A file the tool fails on is a difference too (a broker's own files should never make it
    fail); use :func:`compare` to tell such files apart. Raises ``JarsUnavailable`` when the
    tool's jars cannot be resolved (callers skip with ``tests.kafka_cluster.UNAVAILABLE``).
    """
    result = compare(version, files, flags)
    failed = [Difference(file, 1, f"<DumpLogSegments failed: {error}>", None)
              for file, error in result.tool_failures.items()]
    return result.files_compared, result.lines_compared, result.differences + failed


def compare(version: str, files: Iterable, flags: Sequence[str] = DEEP) -> Comparison:
    """The whole comparison: equal lines, differences, excused differences, files the tool failed on.

    Where the tool failed, the lines it printed before throwing are still compared with the
    first lines of segaudit's dump of that file (which goes on past the entry the tool threw on).
    """
    paths = [str(Path(f)) for f in files]  # one spelling for both tools (new File() prints what it is given)
    flags = tuple(flags)
    result = Comparison(version, flags)
    with ThreadPoolExecutor(1) as pool:  # the JVM runs while segaudit dumps in this process
        kafka_run = pool.submit(kafka_dump, version, paths, flags)
        ours = segaudit_dump(version, paths, flags)
        kafka, failed = kafka_run.result()
    result.tool_failures = {path: error for path, (error, _) in failed.items()}
    for path in paths:
        actual = ours.get(path, [])
        if path in failed:
            expected = failed[path][1]
            actual = actual[:len(expected)]
            if expected and actual and actual[-1] != expected[-1] and actual[-1].startswith(expected[-1]):
                actual[-1] = expected[-1]  # the tool threw half-way through its last line
        else:
            expected = kafka[path]
            result.files_compared += 1
        result.lines_compared += len(expected)
        if expected == actual:
            continue
        for difference in _differences(path, expected, actual):
            excuse = next((e for e in EXCUSES
                           if difference.kafka is not None and difference.segaudit is not None
                           and e.applies(version, flags, difference.kafka, difference.segaudit)), None)
            if excuse is None:
                result.differences.append(difference)
            else:
                result.excused.append((excuse.name, difference))
    return result


def kafka_dump(version: str, paths: Sequence[str],
               flags: Sequence[str]) -> tuple[dict[str, list[str]], dict[str, tuple[str, list[str]]]]:
    """Kafka's stdout per file; and per file the tool threw on, its exception and the lines before it.

    The last result is kept, for a test that reads the same text again right after.
    """
    return _kafka_dump(version, tuple(paths), tuple(flags))


@functools.lru_cache(maxsize=1)
def _kafka_dump(version: str, paths: tuple[str, ...], flags: tuple[str, ...]):
    java, *rest = dump_log_command(version)
    command = [java, *JVM_UTF8, *rest, *flags]
    dumps: dict[str, list[str]] = {}
    failures: dict[str, tuple[str, list[str]]] = {}
    pending = list(paths)
    while pending:
        run = _one_run(pending)
        done = subprocess.run([*command, "--files", ",".join(run)], capture_output=True, timeout=RUN_TIMEOUT)
        sections = _split(done.stdout, run)
        if done.returncode == 0 and len(sections) == len(run):
            dumps.update(zip(run, sections))
            pending = pending[len(run):]
            continue
        # The tool stopped inside the last file it announced: the files before it are whole.
        failed = max(len(sections) - 1, 0)
        dumps.update(zip(run[:failed], sections[:failed]))
        printed = sections[failed] if sections else []
        failures[run[failed]] = (_exception(done.stderr, done.returncode), printed)
        pending = pending[failed + 1:]
    return dumps, failures


def segaudit_dump(version: str, paths: Sequence[str], flags: Sequence[str]) -> dict[str, list[str]]:
    """``segaudit dump-log --kafka-version VERSION`` with the same flags, its stdout per file.

    segaudit iterates deeply by default where the tool does not, so no deep flag means
    ``--no-deep-iteration``. Its stderr holds segaudit's own lines only.
    """
    from analytics.cli import main
    from tests.commands import assert_own_lines

    args = ["dump-log", "--kafka-version", version, *flags]
    if not {"--deep-iteration", "--print-data-log"} & set(flags):
        args.append("--no-deep-iteration")
    dumps: dict[str, list[str]] = {}
    for start in range(0, len(paths), FILES_PER_RUN):
        run = paths[start:start + FILES_PER_RUN]
        buffer = io.BytesIO()
        stdout = io.TextIOWrapper(buffer, encoding="utf-8", newline="\n", write_through=True)
        stderr = io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main([*args, "--", *run])
        stdout.flush()
        assert_own_lines(stderr.getvalue())
        if code != 0:
            raise AssertionError(f"segaudit dump-log exited with {code}")
        dumps.update(zip(run, _split(buffer.getvalue(), run)))
    return dumps


def _one_run(pending: Sequence[str]) -> list[str]:
    run, chars = [], 0
    for path in pending[:FILES_PER_RUN]:
        chars += len(path) + 1
        if run and chars > COMMAND_CHARS:
            break
        run.append(path)
    return run


def _split(stdout: bytes, paths: Sequence[str]) -> list[list[str]]:
    """The lines of each file's dump, from its ``Dumping PATH`` line to the next file's, in order.

    Lines end at ``\\n`` only (a payload may hold ``\\r``); text is UTF-8. A file whose header does
    not come is not in the list, nor any after it.
    """
    lines = stdout.decode("utf-8", "surrogateescape").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    sections: list[list[str]] = []
    headers = [f"Dumping {path}" for path in paths]
    for line in lines:
        if len(sections) < len(headers) and line == headers[len(sections)]:
            sections.append([line])
        elif sections:
            sections[-1].append(line)
    return sections


def _differences(path: str, expected: list[str], actual: list[str]) -> list[Difference]:
    out = []
    matcher = difflib.SequenceMatcher(None, expected, actual, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            kafka = expected[i1 + k] if i1 + k < i2 else None
            ours = actual[j1 + k] if j1 + k < j2 else None
            out.append(Difference(path, (i1 + k if kafka is not None else i2) + 1, kafka, ours))
    return out


def _exception(stderr: bytes, code: int) -> str:
    text = stderr.decode("utf-8", "replace")
    thrown = re.findall(r"^(?:Exception in thread .*|\S+(?:Exception|Error)\b.*)$", text, re.MULTILINE)
    return thrown[0].strip() if thrown else f"exit code {code}"


# --- Files real brokers rarely leave, written byte for byte to put every branch of the dump before the tool.
def write_edge_cases(root: Path) -> list[Path]:
    """Segments, KRaft snapshots, producer snapshots and transaction indexes with the cases the corpus
    lacks: KRaft control records, CRC failures whose records still decode, legacy wrappers, cleaned
    and compacted batches, keys and payloads that are not UTF-8, torn tails, snapshot entries without
    a batch or with an open transaction, a snapshot the broker refuses, a partial index entry."""
    from analytics.kafka.layout import CONTROL_KEY
    from analytics.kafka.sidecars import write_snapshot, write_txnindex
    from analytics.kafka.writer import (
        RecordSpec,
        build_batch,
        build_control_batch,
        build_empty_batch,
        build_end_txn_marker,
        build_legacy_message,
        build_legacy_wrapper,
        write_file,
    )

    t = 1_700_000_000_000  # timestamps
    files = []

    def write(relative: str, entries) -> None:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(entries, bytes):
            path.write_bytes(entries)
        else:
            write_file(path, entries)
        files.append(path)

    def control(offset: int, name: str, value: bytes, *, type_id: int | None = None) -> bytes:
        if type_id is not None:  # a type Kafka does not know
            spec = RecordSpec(CONTROL_KEY.pack(0, type_id), value, t)
            return build_batch(offset, [spec], is_control=True, partition_leader_epoch=3)
        return build_control_batch(offset, name, producer_id=-1, producer_epoch=-1, timestamp=t + offset,
                                   value=value, partition_leader_epoch=3, is_transactional=False)

    def data(offset: int, value: bytes) -> bytes:
        return build_batch(offset, [RecordSpec(None, value, t + offset)], partition_leader_epoch=3)

    def voter(voter_id: int) -> bytes:
        return _i32(voter_id) + _tags()

    def endpoint(name: str, host: str, port: int) -> bytes:
        return _string(name) + _string(host) + port.to_bytes(2, "big") + _tags()

    leader_change_v0 = _i16(0) + _i32(1) + _array([voter(1), voter(2), voter(3)])
    leader_change_v0 += _array([voter(1), voter(3)])
    leader_change_v1 = _i16(1) + _i32(2) + _array([voter(2)]) + _array([voter(2)])
    endpoints = _array([endpoint("CONTROLLER", "localhost", 9093), endpoint("SSL", "h\u00f4te", 9094)])
    voters = _i16(0) + _array([
        _i32(1) + bytes(range(16)) + endpoints + _i16(0) + _i16(1) + _tags() + _tags(),
        _i32(2) + bytes(range(16, 32)) + _array([]) + _i16(0) + _i16(0) + _tags() + _tags(),
    ])
    write("__cluster_metadata-0/00000000000000000000.log", [
        control(0, "LEADER_CHANGE", leader_change_v0 + _tags()),
        control(1, "LEADER_CHANGE", leader_change_v1 + _tags()),
        control(2, "KRAFT_VERSION", _i16(0) + _i16(1) + _tags()),
        control(3, "KRAFT_VOTERS", voters + _tags()),
        control(4, "UNKNOWN", b"\x00\x00", type_id=9),
        data(5, b'{"type":"FEATURE_LEVEL_RECORD"}'),
    ])
    write("__cluster_metadata-0/00000000000000000006.log", [  # the tool throws on this value, mid-line
        control(6, "KRAFT_VOTERS", b"\x00"),
        data(7, b"after"),
    ])
    write("__cluster_metadata-0/00000000000000000010-0000000003.checkpoint", [
        control(0, "SNAPSHOT_HEADER", _i16(0) + (t + 123).to_bytes(8, "big") + _tags()),
        data(1, b"metadata record"),
        control(2, "SNAPSHOT_FOOTER", _i16(0) + _tags()),
    ])

    texts = [b"plain", b"", b"caf\xc3\xa9 \xf0\x9f\x98\x80", b"\xed\xa0\x80\xed\xb5\xef1", b"\xf0\x9f\x98",
             b"\xc3(\xe2\x82\xf0\x90\x80x", b"\xff\xfe\xfd", b"line\nbreak", b"carriage\rreturn",
             b"tab\tand\x00nul", b"key: k payload: p", b"\xe0\x80\xaf\xf4\x90\x80\x80\xc0\xaf"]
    headers = (("trace", b"1"), (_RawKey(b"h\xffk"), None))
    texts_batch = build_batch(
        100, [RecordSpec(k, v, t + 1000 + i, headers=headers)
              for i, (k, v) in enumerate(zip(texts, texts[::-1]))],
        producer_id=42, producer_epoch=1, base_sequence=2_147_483_640, partition_leader_epoch=5)
    nulls = build_batch(112, [RecordSpec(None, None, t + 2000), RecordSpec(b"k", None, t + 2001),
                              RecordSpec(None, b"v", t + 2002)], compression="zstd")
    corrupt = bytearray(build_batch(115, [RecordSpec(b"k", b"value", t + 3000)],
                                    producer_id=42, producer_epoch=1, base_sequence=12))
    corrupt[-3] ^= 0x20  # a flipped bit in the value: the CRC fails, the records still decode
    compacted = build_batch(116, [RecordSpec(b"a", b"1", t + 4000, offset_delta=0),
                                  RecordSpec(b"b", b"2", t + 4003, offset_delta=3)],
                            compression="gzip", log_append_time=t + 4999, delete_horizon_ms=t + 86_400_000,
                            producer_id=43, producer_epoch=0, base_sequence=0, last_offset_delta=4)
    cleaned = build_empty_batch(121, 123, producer_id=44, producer_epoch=2, base_sequence=7,
                                max_timestamp=t + 5000)
    aborted = build_batch(124, [RecordSpec(b"t", b"x", t + 6000)], producer_id=45, producer_epoch=0,
                          base_sequence=0, is_transactional=True, compression="snappy")
    abort = build_end_txn_marker(125, "ABORT", producer_id=45, producer_epoch=0, coordinator_epoch=7,
                                 timestamp=t + 6001)
    torn = build_batch(126, [RecordSpec(b"k", b"cut short", t + 7000)])[:40]  # its size runs past the end
    write("edge-0/00000000000000000100.log",
          [texts_batch, nulls, bytes(corrupt), compacted, cleaned, aborted, abort, torn])

    old = 1_600_000_000_000
    legacy_bad = bytearray(build_legacy_message(3, b"k", b"value", magic=1, timestamp=old + 3))
    legacy_bad[-1] ^= 0x01
    write("legacy-0/00000000000000000000.log", [
        build_legacy_message(0, None, b"v0 \xe9", magic=0),
        build_legacy_wrapper([1, 2], [RecordSpec(b"a", b"x"), RecordSpec(b"b", None)],
                             compression="gzip", magic=0),
        bytes(legacy_bad),
        build_legacy_wrapper(
            [4, 5, 6],
            [RecordSpec(b"c", b"y", old + 4), RecordSpec(None, b"z", old + 5),
             RecordSpec(b"d", b"\xff", old + 6)],
            compression="lz4", magic=1, log_append_time=old + 999),
        build_legacy_wrapper([7, 8], [RecordSpec(b"e", b"w", old + 7), RecordSpec(b"f", b"v", old + 8)],
                             compression="snappy", magic=1),
        b"\x00" * 9,  # a tail shorter than an entry header: the tool stops there
    ])

    write("edge-0/00000000000000000125.snapshot", write_snapshot([
        (42, 1, 2_147_483_647, 111, 11, t + 1011, -1, -1),
        (44, 2, 1, 123, 3, t + 5000, 4, -1),  # firstSequence wraps below 0
        (45, 0, -1, -1, 0, t + 6001, 7, -1),  # a marker only: no batch
        (46, 3, 5, 130, 0, t + 8000, 2, 128),  # an open transaction
    ]))
    write("edge-0/00000000000000000126.snapshot", write_snapshot([]))
    refused = bytearray(write_snapshot([(47, 0, 0, 1, 0, 1, -1, -1)]))
    refused[-1] ^= 0x01  # the CRC fails: the broker, and the tool, read no entry
    write("edge-0/00000000000000000127.snapshot", bytes(refused))
    partial = write_txnindex([(49, 141, 150, 141)])[:20]
    whole = write_txnindex([(45, 124, 125, 124), (48, 126, 140, 126)])
    write("edge-0/00000000000000000100.txnindex", whole + partial)
    write("edge-0/00000000000000000150.txnindex", b"")
    return files


class _RawKey(str):
    """A header key written as these raw bytes (not UTF-8), for ``RecordSpec.headers``."""

    def __new__(cls, raw: bytes):
        key = super().__new__(cls, raw.decode("latin-1"))
        key.raw = raw
        return key

    def encode(self, *args, **kwargs) -> bytes:
        return self.raw


def _i16(value: int) -> bytes:
    return value.to_bytes(2, "big", signed=True)


def _i32(value: int) -> bytes:
    return value.to_bytes(4, "big", signed=True)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _tags() -> bytes:
    return _uvarint(0)


def _array(items: list[bytes]) -> bytes:
    return _uvarint(len(items) + 1) + b"".join(items)


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return _uvarint(len(data) + 1) + data
