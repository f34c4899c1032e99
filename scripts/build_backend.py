"""segaudit's build backend: setuptools', with a wheel that carries segaudit's jar.

Before setuptools builds a wheel, the Java of ``analytics/audit/java`` is compiled by the JDK's
``javac`` into ``segaudit.jar`` beside it (:mod:`analytics.spark.javabuild`), against the jars of
the oldest Spark the package admits, which the build environment installs: Spark keeps its public
API within a major version, so the jar runs on every 4.x the package admits. A wheel cannot be
built without a JDK; an install in place (``pip install -e``, ``scripts/setup.sh``) compiles nothing
here and builds the jar against the installed Spark instead.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 - every hook not defined here is setuptools'

# The Spark the jar is compiled against: the oldest minor version the package's pin admits.
COMPILE_AGAINST = "pyspark>=4.0,<4.1"


def get_requires_for_build_wheel(config_settings=None):
    return [*_setuptools.get_requires_for_build_wheel(config_settings), COMPILE_AGAINST]


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    import pyspark  # from get_requires_for_build_wheel

    javabuild = _javabuild()
    try:
        javabuild.build(Path(pyspark.__file__).resolve().parent / "jars")
    except javabuild.BuildFailed as e:
        sys.exit(f"segaudit build: {e}")
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def _javabuild():
    """:mod:`analytics.spark.javabuild` loaded from its file (the package's dependencies are not here)."""
    path = Path(__file__).resolve().parent.parent / "analytics" / "spark" / "javabuild.py"
    spec = importlib.util.spec_from_file_location("segaudit_javabuild", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
