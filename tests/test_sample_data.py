"""The bundled sample under data/ is reproducible from its script, and reads as documented."""

from __future__ import annotations

import subprocess
import sys

from analytics.inventory import take_inventory
from tests.conftest import REPO

SAMPLE = REPO / "data" / "sample-logdir"


def test_sample_is_rebuilt_byte_for_byte_by_its_script(tmp_path):
    subprocess.run([sys.executable, str(REPO / "scripts" / "make_sample_data.py"), str(tmp_path)], check=True)
    committed = {p.relative_to(SAMPLE): p.read_bytes() for p in SAMPLE.rglob("*") if p.is_file()}
    rebuilt = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert committed.keys() == rebuilt.keys()
    assert all(committed[k] == rebuilt[k] for k in committed)


def test_sample_holds_what_the_readme_says():
    inv = take_inventory([SAMPLE])
    by_partition = {(p.topic, p.partition): p for p in inv.partitions}
    p0, p1 = by_partition[("orders", 0)], by_partition[("orders", 1)]
    assert (p0.batches, p0.records, p0.commits, p0.aborts, p0.snapshots) == (48, 108, 1, 1, 2)
    assert p0.codecs == "gzip,lz4,none,snappy,zstd"
    assert (p1.batches, p1.records) == (15, 17)
    [err] = inv.errors
    assert (err.error_kind, err.bytes_affected) == ("truncated", 45)
    assert inv.total["size_bytes"] == inv.total["valid_bytes"] + 45
