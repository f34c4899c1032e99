"""The README's sample output is what the commands print: its main job and its ``explain`` example
run on the bundled sample, and every line the README shows (``...`` stands for lines left out,
and a trailing ``...`` for the end of a line) must appear in the output, in order."""

from __future__ import annotations

import re

import pytest

from analytics.cli import main
from tests.commands import assert_own_lines
from tests.conftest import REPO

pytestmark = pytest.mark.spark
README = (REPO / "README.md").read_text()


def console_block(after: str) -> list[str]:
    """The lines of the first ```console block following the text ``after``."""
    start = README.index(after)
    block = re.search(r"```console\n(.*?)```", README[start:], re.S)
    assert block, f"no console block after {after!r}"
    return block.group(1).splitlines()


def assert_shown(shown: list[str], printed: str) -> None:
    """Each shown line (but ``...``) matches a printed line, in order; ``...`` in a line matches any text,
    and ``/…/`` any path up to the sample's folder."""
    lines = printed.splitlines()
    at = 0
    for line in shown:
        if line.strip() in ("...", "") or line.startswith("$ "):
            continue
        pattern = re.escape(line.rstrip()).replace(re.escape("/…/"), ".*/").replace(re.escape("..."), ".*")
        for i in range(at, len(lines)):
            if re.fullmatch(pattern, lines[i].rstrip()):
                at = i + 1
                break
        else:
            raise AssertionError(f"the README shows {line!r}, which the command no longer prints (after line {at}):\n"
                                 + printed)


def test_the_readme_shows_what_the_main_job_and_explain_print(spark, tmp_path, capsys):
    out = str(tmp_path / "mixed")
    code = main(["run", str(REPO / "data" / "mixed"), "--out", out, "--config",
                 str(REPO / "data" / "mixed.truth" / "audit.toml"), "--no-history"])
    printed, err = capsys.readouterr()
    assert_own_lines(err)
    assert code == 1  # the sample's planted anomalies
    assert_shown(console_block("The result answers two questions apart"), printed)

    assert main(["explain", out, "--topic", "lost-batch", "--partition", "0", "--offset", "25"]) == 0
    printed, err = capsys.readouterr()
    assert_own_lines(err)
    assert_shown(console_block("## After an incident"), printed)
