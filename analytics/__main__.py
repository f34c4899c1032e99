"""``python -m analytics ...`` is the ``segaudit`` command."""

import sys

from analytics.entry import command

sys.exit(command())
