"""The severity of a verdict (``docs/design.md``): did the broker keep its rules?

One rule for every pure-Python labeller (the audit's reference replay, the generator's ground
truth); the audit's Spark job states the same rule as a Column expression.

>>> from analytics.contract import COMPACTION, CONTROL_MARKER, CORRUPT, OK, SEQUENCE_GAP
>>> [severity(OK, None), severity(CONTROL_MARKER, None), severity(SEQUENCE_GAP, COMPACTION),
...  severity(CORRUPT, None)]
['ok', 'info', 'explained', 'violation']
"""

from __future__ import annotations

from analytics.contract import INFO_VERDICTS, OK_VERDICTS, SEV_EXPLAINED, SEV_INFO, SEV_OK, SEV_VIOLATION


def severity(verdict: str, explained_by: str | None) -> str:
    """``ok`` and ``info`` by the verdict alone; any other verdict is a rule break, ``explained``
    when evidence accounts for it and ``violation`` when none does."""
    if verdict in OK_VERDICTS:
        return SEV_OK
    if verdict in INFO_VERDICTS:
        return SEV_INFO
    return SEV_EXPLAINED if explained_by else SEV_VIOLATION
