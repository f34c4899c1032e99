"""segaudit's jar ships built (``analytics.spark.javabuild``): compiled by the JDK's javac from the
sources beside it, told apart when older than them, and never compiled when segaudit runs; without
a JDK the install says so in one line. The wheel's build backend compiles it against the oldest
Spark the pin admits (``tests/test_spark_versions.py`` installs the wheel and runs it)."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

from analytics.spark import javabuild, javacode

ROOT = Path(__file__).resolve().parent.parent


def test_the_jar_names_the_sources_it_was_built_from_and_an_older_one_is_not_used(tmp_path, monkeypatch):
    built = javabuild.build(javacode.installed_jars(), tmp_path / "segaudit.jar")
    with zipfile.ZipFile(built) as archive:
        names = archive.namelist()
    assert {"segaudit/ReplayWindow.class", "segaudit/CopyTable.class", javabuild.DIGEST_ENTRY} <= set(names)
    assert javabuild.current(built) and javabuild.built_from(built) == javabuild.digest()

    monkeypatch.setattr(javabuild, "JAR", built)
    assert javacode.jar() == built
    # the same classes, built from other sources: not the jar of these
    older = tmp_path / "older.jar"
    with zipfile.ZipFile(built) as source, zipfile.ZipFile(older, "w") as target:
        for name in names:
            target.writestr(name, b"0" * 64 + b"\n" if name == javabuild.DIGEST_ENTRY else source.read(name))
    monkeypatch.setattr(javabuild, "JAR", older)
    assert javacode.jar() is None
    assert "older than its Java sources" in javacode.why_not[0] and "setup.sh" in javacode.why_not[0]
    assert javacode.submit_jars() == [] and javacode.session_conf("x.jar") == {}


def test_without_a_jdk_the_install_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(javabuild, "JAR", tmp_path / "segaudit.jar")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no javac
    assert javacode.main() == 0  # never fails an install
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("segaudit setup: no javac") and "openjdk-17-jdk-headless" in err
    assert "window steps" in err
    assert not (tmp_path / "segaudit.jar").exists()


def test_a_java_error_is_one_line_naming_where():
    output = ("ReplayWindow.java:12: error: cannot find symbol\n    Foo x;\n    ^\n"
              "  symbol:   class Foo\n1 error\n")
    assert javabuild.first_error(output) == "ReplayWindow.java:12: error: cannot find symbol"


def test_the_wheel_compiles_against_the_oldest_spark_the_pin_admits(monkeypatch):
    import tomllib

    spec = importlib.util.spec_from_file_location("build_backend", ROOT / "scripts" / "build_backend.py")
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["build-system"]["build-backend"] == "build_backend"
    [pin] = [d for d in project["project"]["dependencies"] if d.startswith("pyspark")]
    low = pin.split(">=")[1].split(",")[0]
    major, minor = map(int, low.split("."))
    assert backend.COMPILE_AGAINST == f"pyspark>={low},<{major}.{minor + 1}"
    monkeypatch.setattr(backend._setuptools, "get_requires_for_build_wheel", lambda settings=None: ["wheel"])
    assert backend.get_requires_for_build_wheel() == ["wheel", backend.COMPILE_AGAINST]
    assert "audit/java/segaudit.jar" in project["tool"]["setuptools"]["package-data"]["analytics"]
