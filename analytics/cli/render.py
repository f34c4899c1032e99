"""Text rendering of results for the terminal: aligned tables and the check summary.

Pure functions from result objects to strings; the commands print them.
"""

from __future__ import annotations

from collections.abc import Sequence


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


def checks_table(result) -> str:
    """One line per check of a validation: suite, id, pass/FAIL/WARN and the offending rows."""
    rows = [[c.suite, c.id, "pass" if c.success else ("WARN" if c.severity == "warning" else "FAIL"),
             c.unexpected_count] for c in result.checks]
    return render_table(["suite", "check", "result", "offending rows"], rows)


def passed(result) -> str:
    """``"12/19 expectations passed, 7 failed"``."""
    ok = sum(c.success for c in result.checks)
    failed = [c for c in result.checks if not c.success]
    warned = sum(c.severity == "warning" for c in failed)
    text = f"{ok}/{len(result.checks)} expectations passed"
    if failed:
        text += f", {len(failed) - warned} failed" + (f", {warned} warnings" if warned else "")
    return text


def plain(v):
    """JSON- and CSV-friendly: bytes as hex (keys are arbitrary bytes), the rest as they are."""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v
