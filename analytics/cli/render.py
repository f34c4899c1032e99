"""Rendering of results: aligned tables and the check summary for the terminal, and the JSON
documents of ``--format json`` (docs/reference/json-output.md: their keys are a contract, extended only).

Pure functions from result objects to strings or plain dicts; the commands print them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from analytics.contract import SEVERITIES, VERDICTS

PASS, FAIL, WARN = "pass", "fail", "warn"  # a check's result


def render_table(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A plain aligned text table; numbers right-aligned, None as an empty cell.

    >>> print(render_table(["a", "b"], [[1, "x"], [None, "yy"]]))
    a  b
    -  --
    1  x
       yy
    """
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(row[i], int) or row[i] is None for row in rows) and rows for i in range(len(columns))]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    return "\n".join([line(list(columns)), line(["-" * w for w in widths])] + [line(r) for r in cells])


def check_result(check) -> str:
    """``pass``, ``fail``, or ``warn`` (a failure made a warning by ``--warn``)."""
    return PASS if check.success else (WARN if check.severity == "warning" else FAIL)


def checks_table(result) -> str:
    """One line per check of a validation: suite, id, pass/FAIL/WARN and the offending rows."""
    rows = [[c.suite, c.id, r if (r := check_result(c)) == PASS else r.upper(), c.unexpected_count]
            for c in result.checks]
    return render_table(["suite", "check", "result", "offending rows"], rows)


def tally(result) -> dict:
    """How many checks of a validation there are, passed, failed and warned."""
    results = [check_result(c) for c in result.checks]
    return {"total": len(results), "passed": results.count(PASS), "failed": results.count(FAIL),
            "warnings": results.count(WARN)}


def passed(result) -> str:
    """``"12/19 expectations passed, 7 failed"``."""
    t = tally(result)
    text = f"{t['passed']}/{t['total']} expectations passed"
    if t["failed"] or t["warnings"]:
        text += f", {t['failed']} failed" + (f", {t['warnings']} warnings" if t["warnings"] else "")
    return text


def document(doc: dict) -> str:
    """The one JSON document a command prints with ``--format json``."""
    return json.dumps(plain(doc), indent=2, default=str)


def outcome(command: str, exit_code: int, out: str, summary: dict, *, validated=None, paths: dict,
            partitions: int | None = None, producers: int | None = None, seconds: float | None = None) -> dict:
    """The JSON document of ``run``, ``audit`` and ``validate``: the exit code, the audit's counts
    (``summary``: its summary.json), the checks when the command validated, and the paths written.
    Every key is always there; what the command did not produce is null."""
    verdicts = summary.get("verdicts") or {}
    return {
        "command": command,
        "exit_code": exit_code,
        "out": out,
        "summary": {
            "partitions": partitions,
            "producers": producers,
            "batches": sum(verdicts.values()),
            "verdicts": {v: verdicts.get(v, 0) for v in VERDICTS},
            "severities": {s: (summary.get("severities") or {}).get(s, 0) for s in SEVERITIES},
            "transactions": summary.get("transactions") or {},
            "record_duplicates": summary.get("record_duplicates"),
            "snapshot_checks": summary.get("snapshot_checks") or {},
            "replicated_partitions": summary.get("replicated_partitions"),
            "coverage": summary.get("coverage"),
            "topic_identity": summary.get("topic_identity"),
        },
        "expectations": None if validated is None else tally(validated),
        "checks": None if validated is None else [
            {"suite": c.suite, "check": c.id, "result": check_result(c), "offending_rows": c.unexpected_count,
             "allowed": c.allowed, "severity": c.severity, "description": c.description}
            for c in validated.checks],
        "paths": paths,
        "seconds": seconds,
    }


def plain(v):
    """JSON- and CSV-friendly: bytes as hex (keys are arbitrary bytes), the rest as they are."""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v
