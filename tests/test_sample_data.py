"""The bundled sample under data/ is the generator's `mixed` scenario, reproduced byte for byte from its seed."""

from __future__ import annotations

from analytics.generate import generate, truth_dir_for
from analytics.inventory import take_inventory
from tests.conftest import REPO

SAMPLE = REPO / "data" / "mixed"
SEED = 7  # the README's sample: `segaudit generate data/mixed --scenario mixed --seed 7`


def _files(root):
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_sample_is_rebuilt_byte_for_byte_from_its_seed(tmp_path):
    result = generate(tmp_path / "mixed", "mixed", seed=SEED)
    for committed, rebuilt in ((SAMPLE, result.log_dir), (truth_dir_for(SAMPLE), result.truth_dir)):
        a, b = _files(committed), _files(rebuilt)
        assert a.keys() == b.keys()
        assert [k for k in a if a[k] != b[k]] == []


def test_sample_holds_every_scenario_and_only_the_labelled_problems():
    inv = take_inventory([SAMPLE])
    topics = {p.topic for p in inv.partitions}
    assert len(topics) == 20 and "transactions-v2" in topics and "legacy-magic1" in topics and "stale-retry" in topics
    assert sorted(e.error_kind for e in inv.errors) == ["crc_mismatch", "crc_mismatch", "truncated", "zero_filled"]
    assert inv.total["size_bytes"] == inv.total["valid_bytes"] + sum(e.bytes_affected for e in inv.errors)
    # an empty .snapshot (no idempotent producer yet) is read as one marker row, which counts as no entry
    snapshots = {(p.topic, p.partition): p.snapshots for p in inv.partitions}
    assert (snapshots["plain-retries", 0], snapshots["legacy-magic1", 0]) == (0, 1)  # 30: empty, 55: one entry
