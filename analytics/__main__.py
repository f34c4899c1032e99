"""``python -m analytics ...`` is the ``segaudit`` command."""

import sys

from analytics.cli import main

sys.exit(main())
