"""scripts/setup.sh refuses to go on without Java 17+, with one clear message saying how to get it."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.commands import assert_own_lines
from tests.conftest import REPO

TOOLS = ("dirname", "sed", "head", "cat", "sha256sum", "cut")


def _run_setup(tmp_path, java_version_line: str | None) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    if java_version_line is not None:
        java = bin_dir / "java"
        java.write_text(f"#!/bin/sh\necho '{java_version_line}' >&2\n")
        java.chmod(0o755)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    done = subprocess.run(["/bin/bash", str(REPO / "scripts" / "setup.sh")], env=env, capture_output=True, text=True)
    assert_own_lines(done.stderr)
    return done


def test_missing_java_is_exit_2_with_how_to_install(tmp_path):
    proc = _run_setup(tmp_path, None)
    assert proc.returncode == 2
    assert "Java 17+ is required" in proc.stderr and "apt-get install -y openjdk-17-jdk-headless" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0


@pytest.mark.parametrize("line", ['openjdk version "11.0.20" 2023-07-18', 'java version "1.8.0_392"'])
def test_old_java_is_exit_2_naming_the_version_found(tmp_path, line):
    proc = _run_setup(tmp_path, line)
    assert proc.returncode == 2
    assert "Java 17+ is required, found:" in proc.stderr and line in proc.stderr


def test_missing_maven_is_exit_2_with_how_to_install(tmp_path):
    """scripts/test.sh needs Maven for the real-broker tests and says how to get it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    for tool in (*TOOLS, "java", "bash"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    proc = subprocess.run(["/bin/bash", str(REPO / "scripts" / "test.sh"), "--co", "-q"], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert_own_lines(proc.stderr)
    assert "Maven (mvn) is required" in proc.stderr and "apt-get install -y maven" in proc.stderr
