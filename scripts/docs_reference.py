"""The documentation site's generated reference, written while MkDocs builds it (``hooks:`` in mkdocs.yml).

A page holds a marker, ``<!-- segaudit:NAME -->``, where its generated part goes; NAME is one of
:data:`SECTIONS`. Each part is made from the code it describes, so the site cannot say something else:

- ``cli``: every command and option, from the command line's parser (``analytics/cli/parser.py``);
- ``tables``: every table under OUT and its columns, from the contract's schemas (``OUT_SCHEMAS``);
- ``verdicts``: verdicts, severities and explanations, from the contract's vocabulary;
- ``checks``: every check of the Great Expectations suites (``expectations/suites.py``), as the
  default configuration declares them with records and replicas;
- ``exit-codes``: the exit codes (``EXIT_CODES``, whose codes are the vocabulary's ``EXIT_*``).

Everything here is pure Python: no JVM starts (the Spark types come from PySpark's own Arrow mapping).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # this checkout's code, also when another one is installed
    sys.path.insert(0, str(REPO))

MARKER = re.compile(r"<!-- segaudit:([a-z-]+) -->")


def _cell(text: object) -> str:
    """Text for a Markdown table cell: one line, its pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: tuple[str, ...], rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# -- the command line ---------------------------------------------------------------------------------

def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    names = ", ".join(f"`{s}`" for s in action.option_strings)
    if action.nargs == 0:
        return names
    metavar = action.metavar or (
        "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper())
    return f"{names} `{metavar}`"


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], False, True):
        return ""
    return f"`{action.default}`"


def cli_markdown() -> str:
    """Every command: its description, usage, options (with defaults) and the exit codes it can end with."""
    from analytics.cli.parser import parser

    ap = parser()
    out = ["`segaudit` takes these options before its command:\n",
           _table(("option", "meaning"), [(_flags(a), a.help) for a in ap._actions
                                          if a.option_strings and a.help != argparse.SUPPRESS])]
    for name, p in ap.commands.items():
        usage = " ".join(p.format_usage().removeprefix("usage: ").split())
        out.append(f"### `segaudit {name}`\n\n{p.description}\n\n```text\n{usage}\n```\n")
        rows = [(_flags(a), a.help, _default(a)) for a in p._actions
                if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]
        out.append(_table(("argument", "meaning", "default"), rows))
        epilog = (p.epilog or "").split("exit codes:\n", 1)
        if epilog[0].strip():
            out.append(epilog[0].strip() + "\n")
        codes = [line.split(None, 1) for line in epilog[-1].splitlines() if line.strip()] if len(epilog) > 1 else []
        out.append("Exit codes: " + "; ".join(f"`{c}` {m}" for c, m in codes) + ".\n")
    return "\n".join(out)


# -- the tables ---------------------------------------------------------------------------------------

def _spark_type(t) -> str:
    """The Spark SQL type an Arrow type maps onto, as Spark maps it (PySpark's own function: no JVM)."""
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(t).simpleString()


def tables_markdown() -> str:
    """Every table under OUT, by the stage that writes it, with each column's Spark SQL and Arrow type."""
    from analytics.contract import schemas, vocabulary

    stages = (("The export", vocabulary.EXPORT_TABLES), ("The audit", vocabulary.AUDIT_TABLES),
              ("Reconcile", vocabulary.RECONCILE_TABLES))
    out = []
    for stage, names in stages:
        out.append(f"### {stage}\n\n" + ", ".join(f"[`{n}`](#{n.replace('_', '-')})" for n in names) + "\n")
        for name in names:
            schema = schemas.OUT_SCHEMAS[name]
            same = " (the rows of `batch_verdicts` whose severity is not `ok`)" if name == "anomalies" else ""
            out.append(f"#### `{name}` {{#{name.replace('_', '-')}}}\n\n{len(schema)} columns{same}.\n")
            out.append(_table(("column", "Spark SQL type", "Arrow type", "nullable"),
                              [(f"`{f.name}`", f"`{_spark_type(f.type)}`", f"`{f.type}`",
                                "yes" if f.nullable else "no") for f in schema]))
    return "\n".join(out)


# -- verdicts and explanations ------------------------------------------------------------------------

def verdicts_markdown() -> str:
    from analytics.contract import vocabulary as v

    from analytics.replay.severity import severity

    def severities(verdict: str) -> str:
        """The severity rule's answers for the verdict, without and (if it can have one) with an explanation."""
        alone = severity(verdict, None)
        if verdict in v.NEVER_EXPLAINED:
            return alone
        return f"{alone}, or {severity(verdict, v.EXPLANATIONS[0])} with an explanation"

    return "\n".join([
        "## Verdicts\n", "In the contract's order (`batch_verdicts.verdict`):\n",
        _table(("verdict", "the batch is", "severity"),
               [(f"`{k}`", v.VERDICT_MEANING[k], severities(k)) for k in v.VERDICTS]),
        "## Severities\n", "`batch_verdicts.severity`, from least to most severe: "
        + ", ".join(f"`{s}`" for s in v.SEVERITIES) + ".\n",
        f"**{v.BROKER_QUESTION}** {v.BROKER_ANSWER}\n", f"**{v.DATA_QUESTION}** {v.DATA_ANSWER}\n",
        "## Explanations\n", "`batch_verdicts.explained_by`, in the order the audit tries them:\n",
        _table(("explanation", "what proves it"), [(f"`{k}`", v.EXPLANATION_MEANING[k]) for k in v.EXPLANATIONS]),
    ])


# -- checks -------------------------------------------------------------------------------------------

def declared_suites() -> dict:
    """The suites as ``segaudit validate`` declares them with the default configuration, on an export
    with records and with a partition from several log dirs (so every check there is)."""
    from analytics.audit.config import AuditConfig
    from expectations.suites import suites

    return suites(AuditConfig(), has_records=True, has_replicas=True)


def checks_markdown() -> str:
    from expectations.suites import TABLE_OF_SUITE

    out = []
    for suite, checks in declared_suites().items():
        out.append(f"### `{suite}`\n\nValidated against `{TABLE_OF_SUITE[suite]}`; {len(checks)} checks.\n")
        out.append(_table(("check", "expects", "reads"), [(f"`{c.id}`", c.description, f"`{c.table}`")
                                                          for c in checks]))
        for c in checks:
            out.append(f"`{c.id}` fails on the rows of:\n\n```sql\n{c.query_for(TABLE_OF_SUITE[suite]).strip()}\n```\n")
    return "\n".join(out)


# -- exit codes ---------------------------------------------------------------------------------------

def exit_codes_markdown() -> str:
    """The table of exit codes (``| exit code | meaning |``), then which commands end with which."""
    from analytics.cli.parser import EXIT_CODES

    every = _table(("exit code", "meaning"), [(f"`{code}`", meaning) for code, meaning, _ in EXIT_CODES])
    which = _table(("exit code", "commands"), [(f"`{code}`", "every command" if commands is None else
                                                ", ".join(f"`{c}`" for c in commands))
                                               for code, meaning, commands in EXIT_CODES])
    return every + "\nThe commands that can end with each:\n\n" + which


SECTIONS = {"cli": cli_markdown, "tables": tables_markdown, "verdicts": verdicts_markdown,
            "checks": checks_markdown, "exit-codes": exit_codes_markdown}


def generate(markdown: str) -> str:
    """``markdown`` with every marker replaced by its generated part; an unknown marker is an error."""
    def part(m: re.Match) -> str:
        if m[1] not in SECTIONS:
            raise ValueError(f"unknown generated section {m[1]!r}; known: {', '.join(SECTIONS)}")
        return SECTIONS[m[1]]()

    return MARKER.sub(part, markdown)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 - MkDocs' hook signature
    return generate(markdown)
