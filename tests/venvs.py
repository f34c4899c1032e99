"""Venvs of other PySpark releases, each holding that release and segaudit's other dependencies (not
segaudit itself: a test puts this checkout or a wheel beside it), built once into
``~/.cache/segaudit/venvs`` and kept between runs, by one process at a time."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def dependencies() -> list[str]:
    """segaudit's dependencies as pyproject.toml declares them."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


def spark_venv(version: str) -> Path:
    """A venv holding PySpark ``version`` and segaudit's other dependencies, built once."""
    others = [d.split("#")[0].strip() for d in dependencies() if not d.startswith("pyspark")]
    wanted = [f"pyspark[connect]=={version}", *others]
    key = hashlib.sha256("\n".join([sys.version, *wanted]).encode()).hexdigest()[:12]
    home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "segaudit" / "venvs"
    target = home / f"pyspark-{version}-{key}"
    if (target / "ready").is_file():
        return target
    home.mkdir(parents=True, exist_ok=True)
    with open(home / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process builds it; another worker waits, then takes it
        if (target / "ready").is_file():
            return target
        building = home / f".{target.name}.{os.getpid()}"
        shutil.rmtree(building, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(building)], check=True)
        done = subprocess.run([str(building / "bin" / "python"), "-m", "pip", "install", "-q", *wanted],
                              capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(building, ignore_errors=True)
            pytest.fail(f"PySpark {version} could not be installed (PyPI unreachable?): {done.stderr[-2000:]}")
        shutil.rmtree(target, ignore_errors=True)
        building.rename(target)  # a venv's python runs from any folder: pyvenv.cfg names the base
        (target / "ready").write_text(version)
    return target
