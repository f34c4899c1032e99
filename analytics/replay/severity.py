"""The severity of a verdict (``docs/design.md``): did the broker keep its rules?

One rule for every pure-Python labeller (the audit's reference replay, the generator's ground
truth); the audit's Spark job states the same rule as a Column expression.

>>> from analytics.contract import COMPACTION, CONTROL_MARKER, CORRUPT, DUPLICATE, OK, SEQUENCE_GAP, SEQUENCE_REUSE
>>> [severity(OK, None), severity(CONTROL_MARKER, None), severity(SEQUENCE_GAP, COMPACTION),
...  severity(CORRUPT, None), severity(DUPLICATE, SEQUENCE_REUSE)]
['ok', 'info', 'explained', 'violation', 'info']
"""

from __future__ import annotations

from analytics.contract import (INFO_EXPLANATIONS, INFO_VERDICTS, OK_VERDICTS, SEV_EXPLAINED, SEV_INFO, SEV_OK,
                                SEV_VIOLATION)


def severity(verdict: str, explained_by: str | None) -> str:
    """``ok`` and ``info`` by the verdict alone; any other verdict is a rule break, ``explained``
    when evidence accounts for it and ``violation`` when none does; ``info`` again when the evidence
    shows it breaks no rule of the data either (``INFO_EXPLANATIONS``: a sequence reuse)."""
    if verdict in OK_VERDICTS:
        return SEV_OK
    if verdict in INFO_VERDICTS or explained_by in INFO_EXPLANATIONS:
        return SEV_INFO
    return SEV_EXPLAINED if explained_by else SEV_VIOLATION
