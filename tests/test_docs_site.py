"""The documentation: the README is an entry whose links all resolve, and the MkDocs site builds with
``--strict`` (a broken link or anchor fails it), its reference pages generated from the code."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.docs_site import reference_hook

README = REPO / "README.md"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=config.parent, capture_output=True, text=True, env=env)


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(page.read_text()) if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]


def test_the_readme_is_an_entry_of_at_most_200_lines():
    assert len(README.read_text().splitlines()) <= 200


def test_every_relative_link_of_the_readme_resolves_to_a_file():
    links = relative_links(README)
    assert links
    missing = [t for t in links if not (README.parent / t.split("#", 1)[0]).is_file()]
    assert missing == []


def test_the_readme_leads_to_the_sample_an_s3_run_and_a_cluster_run():
    links = {t.split("#", 1)[0] for t in relative_links(README)}
    assert {"docs/index.md", "docs/how-to/s3-and-clusters.md"} <= links
    assert "bash scripts/demo.sh" in README.read_text()
    clusters = (REPO / "docs" / "how-to" / "s3-and-clusters.md").read_text()
    assert "segaudit run s3://kafka-logs/broker-1 --out s3://audit/broker-1" in clusters
    assert "<!-- the cluster block: tests/test_cluster_readme.py runs it as written -->" in clusters
    assert "spark-submit --master spark://spark-master:7077" in clusters


def test_the_generated_reference_names_every_command_table_check_and_exit_code():
    from analytics.cli.parser import EXIT_CODES, parser
    from analytics.contract import OUT_SCHEMAS, VERDICTS

    hook = reference_hook()
    pages = {name: (REPO / "docs" / "reference" / f"{name}.md").read_text()
             for name in ("cli", "tables", "verdicts", "checks", "exit-codes")}
    for name, text in pages.items():
        assert f"<!-- segaudit:{name} -->" in text, name
    generated = {name: hook.generate(text) for name, text in pages.items()}
    assert not any("<!-- segaudit:" in text for text in generated.values())
    for command, p in parser().commands.items():
        assert f"### `segaudit {command}`" in generated["cli"]
        for action in p._actions:
            assert all(f"`{flag}`" in generated["cli"] for flag in action.option_strings), (command, action.dest)
    for table, schema in OUT_SCHEMAS.items():
        section = generated["tables"].split(f"#### `{table}`", 1)[1].split("\n#### ", 1)[0]
        assert [f"`{f.name}`" for f in schema] == re.findall(r"^\| (`[^`]+`) \|", section, re.M)[:len(schema)]
    assert all(f"| `{v}` |" in generated["verdicts"] for v in VERDICTS)
    checks = [c.id for cs in hook.declared_suites().values() for c in cs]
    assert len(checks) > 20 and all(f"| `{c}` |" in generated["checks"] for c in checks)
    assert all(f"| `{code}` | {meaning} |" in generated["exit-codes"] for code, meaning, _ in EXIT_CODES)
    try:
        hook.generate("<!-- segaudit:nothing -->")
    except ValueError as e:
        assert "nothing" in str(e)
    else:
        raise AssertionError("an unknown marker was left as it was")


def test_the_site_builds_with_strict(tmp_path):
    site = tmp_path / "site"
    done = mkdocs_build(REPO / "mkdocs.yml", site)
    assert done.returncode == 0, done.stderr
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "segaudit explain" in cli and "--offset" in cli
    checks = (site / "reference" / "checks" / "index.html").read_text()
    assert "no_duplicate_record" in checks
    assert (site / "benchmarks" / "index.html").is_file() and (site / "architecture" / "index.html").is_file()


def test_a_broken_link_or_anchor_fails_the_strict_build(tmp_path):
    """The site's own configuration, on a copy of its pages with one link to no page and one to no heading."""
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    with (docs / "index.md").open("a") as page:
        page.write("\n[gone](no-such-page.md) and [nowhere](reference/cli.md#no-such-heading)\n")
    config = (REPO / "mkdocs.yml").read_text().replace("docs_dir: docs", f"docs_dir: {docs}")
    config = config.replace("  - scripts/docs_reference.py", f"  - {REPO / 'scripts' / 'docs_reference.py'}")
    (tmp_path / "mkdocs.yml").write_text(config)
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr and "no-such-heading" in done.stderr
