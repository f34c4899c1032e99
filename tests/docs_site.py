"""The documentation site's build hook (scripts/docs_reference.py), loaded as MkDocs loads it: from its file."""

from __future__ import annotations

import importlib.util
from functools import cache
from types import ModuleType

from tests.conftest import REPO

HOOK = REPO / "scripts" / "docs_reference.py"


@cache
def reference_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("segaudit_docs_reference", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
