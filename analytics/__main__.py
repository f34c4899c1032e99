"""``python -m analytics ...`` is the ``segaudit`` command."""

import sys

from analytics.cli import command

sys.exit(command())
