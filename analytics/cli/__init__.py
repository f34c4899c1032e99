"""The ``segaudit`` command line: :mod:`.main` parses and reports failures, :mod:`.commands` calls the
library (:mod:`analytics.pipeline`) and renders with :mod:`.render` and :mod:`.forensic`."""

from analytics.cli.main import command, main
from analytics.cli.render import render_table

__all__ = ["command", "main", "render_table"]
