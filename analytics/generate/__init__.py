"""``segaudit generate``: write a real Kafka log directory for a named scenario, with its ground truth.

The scenarios (:mod:`.scenarios`) drive producer clients (:mod:`.producers`) against a simulated
broker (:mod:`.sim`) that decides by the rules of :mod:`analytics.replay.broker`, rewrites
partitions as the log cleaner does (:mod:`.cleaner`) and writes Kafka's files (:mod:`.files`);
every batch written is labelled (:mod:`.labels`) and the labels stream to Parquet (:mod:`.truth`).

>>> sorted(SCENARIO_NAMES)[:3]
['clean', 'compacted', 'corrupt-crc']
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from analytics.generate.producers import Context
from analytics.generate.scenarios import PROFILE_OF, SCENARIO_NAMES, SCENARIOS
from analytics.generate.sim import SimLogDir
from analytics.generate.truth import TruthWriter
from analytics.progress import Ticker
from analytics.replay.profiles import DEFAULT_PROFILE

# Record-duplicate truth needs memory per distinct record; past this scale it is not computed.
RECORD_DUPLICATES_MAX_SCALE = 100

# mixed runs every scenario in this order; transactions last, so its young open transaction
# is still OPEN (not HANGING) when the export ends.
MIXED_ORDER = [name for name in SCENARIOS if name != "transactions"] + ["transactions"]


@dataclass(frozen=True, slots=True)
class Generated:
    log_dir: Path
    truth_dir: Path
    batches: int
    verdicts: dict[str, int]


def truth_dir_for(log_dir: Path) -> Path:
    """Ground truth lives beside the log directory, never inside it (a reader would see stray files)."""
    log_dir = Path(log_dir)
    return log_dir.parent / f"{log_dir.name}.truth"


def generate(log_dir: str | Path, scenario: str, *, seed: int = 0, scale: int = 1, profile: str | None = None,
             progress: Callable[[str], None] | None = None) -> Generated:
    """Write ``log_dir`` (which must not exist or be empty) and its ``.truth`` folder; ``progress``
    hears how far it got while it runs (:class:`analytics.progress.Ticker`)."""
    if scenario not in SCENARIO_NAMES:
        raise ValueError(f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIO_NAMES)}")
    if scale < 1:
        raise ValueError("scale must be at least 1")
    log_dir = Path(log_dir)
    if log_dir.exists() and any(log_dir.iterdir()):
        raise FileExistsError(f"{log_dir} exists and is not empty")
    truth_dir = truth_dir_for(log_dir)
    if truth_dir.exists() and any(truth_dir.iterdir()):
        raise FileExistsError(f"{truth_dir} exists and is not empty")
    profile = profile or PROFILE_OF.get(scenario, DEFAULT_PROFILE.name)
    names = MIXED_ORDER if scenario == "mixed" else [scenario]
    meta = {"scenario": scenario, "seed": seed, "scale": scale, "profile": profile}
    truth = TruthWriter(truth_dir, scenario=meta, record_duplicates=scale <= RECORD_DUPLICATES_MAX_SCALE)
    log = SimLogDir(log_dir, profile=profile, truth=truth)
    log_dir.mkdir(parents=True, exist_ok=True)
    ctx = Context(log, random.Random(seed), scale)
    done: list[str] = []

    def describe(seconds: float) -> str | None:
        try:
            batches = sum(list(truth.counts.values()))
        except RuntimeError:  # the counts changed meanwhile: said next time
            return None
        step = f"scenario {len(done) + 1}/{len(names)}" if len(done) < len(names) else "writing the files"
        return f"  generating: {seconds:.0f} s, {step}, {batches:,} batches"

    with Ticker(describe, progress):
        for name in names:
            SCENARIOS[name](ctx)
            done.append(name)
        # the simulated brokers' producer.id.expiration.ms, whatever the profile's default
        meta["audit"] = {"profile": profile, "producer_id_expiration_ms": log.expiration_ms} | ctx.config
        log.write()
    return Generated(log_dir, truth_dir, sum(truth.counts.values()), dict(truth.counts))
