"""The layers of ``docs/architecture.md``, read from the code: every import (also those inside
functions) points to a lower layer or stays inside its own package, and no module imports itself
back through others (no import cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("analytics", "expectations", "jobs")
# Lowest first. A module may import from a lower layer, or within its own unit.
LAYERS = (
    ("analytics.contract",),
    ("analytics.tuning",),
    ("analytics.errors", "analytics.processes", "analytics.progress", "analytics.kafka"),
    ("analytics.cluster",),
    ("analytics.replay", "analytics.publish", "analytics.reuse", "analytics.spark"),
    ("analytics.generate",),
    ("analytics.audit", "analytics.export", "analytics.inventory", "analytics.reconcile"),
    ("expectations",),
    ("analytics.report",),
    ("analytics.export_plan",),
    ("analytics.forensics", "analytics.pipeline"),
    ("analytics.cli",),
    ("analytics.entry",),
    ("analytics.__main__", "jobs"),
)
# analytics/__init__.py holds only the version; every layer may read it
SHARED = ("analytics",)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The segaudit modules ``name`` imports, at the top or inside functions."""
    out = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def unit(name: str) -> tuple[int, str] | None:
    for rank, layer in enumerate(LAYERS):
        for prefix in layer:
            if name == prefix or name.startswith(prefix + "."):
                return rank, prefix
    return None


def test_every_module_belongs_to_a_layer():
    assert [m for m in modules() if unit(m) is None and m not in SHARED] == []


def test_imports_point_down_the_layers():
    found = modules()
    wrong = []
    for name, path in found.items():
        if name in SHARED:
            continue
        rank, own = unit(name)
        for target in imports(name, path, set(found)):
            if target in SHARED:
                continue
            t_rank, t_unit = unit(target)
            if t_unit != own and t_rank >= rank:
                wrong.append(f"{name} -> {target}")
    assert wrong == []


def test_no_import_cycle():
    found = modules()
    graph = {name: imports(name, path, set(found)) for name, path in found.items()}
    # a package's __init__ re-exporting its modules is not a cycle with them
    graph = {n: {t for t in ts if not n.startswith(t + ".")} for n, ts in graph.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(trail[trail.index(nxt):] + [nxt]) if nxt in trail else f"{node} -> {nxt}")
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


@pytest.mark.parametrize("package", PACKAGES)
def test_modules_stay_small(package):
    """One reason to change per module: none grows past 450 lines."""
    large = {str(p.relative_to(ROOT)): n for p in (ROOT / package).rglob("*.py")
             if (n := len(p.read_text().splitlines())) > 450}
    assert large == {}
