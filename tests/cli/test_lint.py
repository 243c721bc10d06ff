"""The tree is lint-clean: ruff, configured in pyproject.toml, runs as part of the suite,
so the README's test command (and CI) enforces it; the architecture holds (import-linter's
contracts in pyproject.toml, and no import cycles among the modules); and no module of the
package outgrows one job."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    if shutil.which("ruff") is None and subprocess.run([sys.executable, "-m", "ruff", "--version"],
                                                      capture_output=True).returncode != 0:
        pytest.fail('ruff is not installed; it is part of the test extra: pip install ".[test]"')
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


PACKAGES = ("rltui", "trainers")


def test_the_import_contracts_hold():
    """pyproject.toml's [tool.importlinter] contracts: rltui's layers, trainers below rltui,
    Textual in the UI only, no cycles between the parts of a package."""
    try:
        import importlinter  # noqa: F401 - only to say what is missing
    except ImportError:
        pytest.fail('import-linter is not installed; it is part of the test extra: pip install ".[test]"')
    lint_imports = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    result = subprocess.run([sys.executable, "-c", lint_imports, "--no-cache"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def import_cycles(packages: tuple[str, ...]) -> list[dict[str, list[str]]]:
    """Each group of modules that import one another round a cycle (a strongly connected
    component of the import graph with more than one module), as module -> the modules of
    its group it imports. Imports inside functions count: they couple modules as much."""
    import grimp

    graph = grimp.build_graph(*packages, cache_dir=None)
    ours = sorted(m for m in graph.modules if m.split(".")[0] in packages)
    edges = {m: sorted(d for d in graph.find_modules_directly_imported_by(m) if d.split(".")[0] in packages)
             for m in ours}
    # Tarjan's algorithm; the graph's depth (a few hundred modules) is well within the recursion limit.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[dict[str, list[str]]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in edges[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append({m: [d for d in edges[m] if d in group] for m in sorted(group)})

    for module in ours:
        if module not in index:
            visit(module)
    return groups


def test_no_modules_import_each_other_round_a_cycle():
    cycles = import_cycles(PACKAGES)
    shown = "\n\n".join("\n".join(f"{m} -> {', '.join(imported)}" for m, imported in group.items())
                         for group in cycles)
    assert not cycles, f"{len(cycles)} import cycle(s):\n{shown}"


MAX_MODULE_LINES = 400  # past this a module is doing more than one job


def test_every_module_does_one_job_in_at_most_400_lines():
    long = {str(path.relative_to(ROOT)): n for package in ("rltui", "trainers")
            for path in sorted((ROOT / package).rglob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}
