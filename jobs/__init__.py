"""Thin Spark entry points for ``spark-submit``: each is ``segaudit COMMAND`` (:func:`submit`).

A job takes the options of its command and runs the command itself, through
:func:`analytics.cli.main.main`: the same parser, the same command function turning the options
into the pipeline's call (``analytics.cli.commands``), the same output and the same failure line
and exit code (``analytics.cli.main.guarded``). Under ``spark-submit`` the command's session is the
submitted one, with its master and configuration (``analytics.spark.session.get_spark``), and an
export is read in Spark, never in the command's own process (``analytics.export_plan.export_plan``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def submit(command: str, argv: Sequence[str] | None = None) -> int:
    """``segaudit COMMAND ARGV...`` in this process (``argv``: the job's arguments, ``sys.argv[1:]``
    by default); its exit code. ``--debug`` may be among the job's arguments (before a ``--``): it is
    ``segaudit --debug COMMAND ...``, the traceback of a failure too."""
    from analytics.cli.main import main

    argv = list(sys.argv[1:] if argv is None else argv)
    end = argv.index("--") if "--" in argv else len(argv)
    debug = "--debug" in argv[:end]
    rest = [a for a in argv[:end] if a != "--debug"] + argv[end:]
    return main([*(["--debug"] if debug else []), command, *rest])


def renamed(old: str, command: str, argv: Sequence[str] | None = None) -> int:
    """``jobs/<old>.py``, the former name of ``jobs/<command>.py``: says so on stderr, then runs it."""
    print(f"segaudit: warning: jobs/{old}.py is now jobs/{command}.py; the old name will be removed",
          file=sys.stderr)
    return submit(command, argv)
