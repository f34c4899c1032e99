"""Every failure a segaudit command reports, and the exit code it ends with.

Each is one clear line on stderr (``analytics.cli``); the traceback only with ``--debug``.
Problems inside Kafka's bytes are not failures: they are ``parse_errors`` rows
(:mod:`analytics.kafka.errors` holds the reader's one exception for them).
"""

from __future__ import annotations

import difflib

from analytics.contract.vocabulary import EXIT_SIGINT, EXIT_SIGTERM, EXIT_USAGE


class SegauditError(Exception):
    """A failure with a message for the operator and an exit code."""

    exit_code = EXIT_USAGE


class UsageError(SegauditError):
    """Bad usage: an option, a name or a path that is wrong (exit code 2)."""


class InputError(SegauditError):
    """Inputs that cannot be read or exported: nothing to read, an unreadable configuration (exit 2)."""


class StageMissing(SegauditError):
    """``OUT`` holds no complete output of a stage the command reads (exit 2)."""


class OutOfStep(SegauditError):
    """``OUT``'s stages were built from different runs: what to re-run is in the message (exit 2)."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: the running stage was abandoned, ``OUT`` keeps its previous run.

    A ``KeyboardInterrupt``, not an ``Exception``: code that handles the exceptions of its own work
    (Py4J, Great Expectations) lets it through, as it does Ctrl-C.
    """

    def __init__(self, signal_name: str, stage: str | None = None):
        self.signal_name = signal_name
        self.stage = stage
        self.exit_code = EXIT_SIGTERM if signal_name == "SIGTERM" else EXIT_SIGINT
        where = f" during {stage}" if stage else ""
        super().__init__(f"interrupted ({signal_name}){where}; OUT still holds the previous complete run")


LISTED = 20  # names an unknown-name message lists at most


def unknown(kind: str, name: str, known: list[str]) -> str:
    """One line for a name that is not there: the closest known names first, then the known names.

    >>> unknown("topic", "ordrs", ["orders", "payments"])
    "unknown topic 'ordrs' (did you mean 'orders'?); topics: orders, payments"
    """
    if not known:
        return f"unknown {kind} {name!r}: the audit holds none"
    hint = did_you_mean(name, known)
    listed = ", ".join(known[:LISTED]) + (f" and {len(known) - LISTED} more" if len(known) > LISTED else "")
    return f"unknown {kind} {name!r}{hint}; {kind}s: {listed}"


def did_you_mean(name: str, known, quote=repr) -> str:
    """`` (did you mean X?)`` with the known names closest to ``name`` (difflib), or "" when none is close.

    >>> did_you_mean("--outt", ["--out", "--records"], quote=str), did_you_mean("xyz", ["--out"])
    (' (did you mean --out?)', '')
    """
    close = difflib.get_close_matches(name, list(known), n=3)
    return f" (did you mean {' or '.join(quote(c) for c in close)}?)" if close else ""
