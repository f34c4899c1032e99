"""Shared fixtures. Pure-Python tests need no JVM; Spark tests take the one session-scoped ``spark``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("SEGAUDIT_CORPUS", REPO.parent / "shared" / "corpus"))


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def spark():
    """The one Spark session of the test run: local, two cores, few shuffle partitions, no UI."""
    from analytics.spark.session import get_spark

    session = get_spark(
        "local[2]",
        conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()
