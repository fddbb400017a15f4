"""The package layout is the architecture (docs/architecture.md): layers, no import circle, small
modules, nothing of the benchmarks in the wheel. Each rule is also shown to fail on a violation."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "agentlog"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
MAX_LINES = 600
MAX_ROOT_MODULES = 10


def import_cycles(root: Path) -> list[list[str]]:
    """Every set of modules of the ``agentlog`` found first under ``root`` that import each other
    in a circle (any import: module level, in a function or under TYPE_CHECKING). Run in a fresh
    interpreter, so the package this test process imported is not the one analysed."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", _CYCLES], env=env, capture_output=True, text=True,
                          timeout=300, check=True)
    cycles: list[list[str]] = json.loads(done.stdout)
    return cycles


_CYCLES = """
import json, sys
import grimp

graph = grimp.build_graph("agentlog", cache_dir=None)
index, low, stack, on_stack, cycles = {}, {}, [], set(), []
sys.setrecursionlimit(10_000)

def visit(module):  # Tarjan's strongly connected components
    index[module] = low[module] = len(index)
    stack.append(module)
    on_stack.add(module)
    for imported in sorted(graph.find_modules_directly_imported_by(module)):
        if imported not in index:
            visit(imported)
            low[module] = min(low[module], low[imported])
        elif imported in on_stack:
            low[module] = min(low[module], index[imported])
    if low[module] == index[module]:
        component = []
        while True:
            member = stack.pop()
            on_stack.discard(member)
            component.append(member)
            if member == module:
                break
        if len(component) > 1:
            cycles.append(sorted(component))

for module in sorted(graph.modules):
    if module not in index:
        visit(module)
print(json.dumps(cycles))
"""


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the repository's contracts, on the package found first under ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def violating_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package whose kernel imports the CLI (upward) and whose CLI is imported back."""
    root = tmp_path_factory.mktemp("violating")
    shutil.copytree(PACKAGE, root / "agentlog", ignore=shutil.ignore_patterns("__pycache__"))
    events = root / "agentlog" / "core" / "events.py"
    events.write_text(events.read_text() + "\n\ndef _upward() -> object:\n"
                      "    from agentlog.cli import render\n\n    return render\n")
    return root


def test_the_tree_has_no_import_circle() -> None:
    assert import_cycles(REPO / "src") == []


def test_an_import_circle_is_found(violating_copy: Path) -> None:
    cycles = import_cycles(violating_copy)
    assert any("agentlog.core.events" in cycle and "agentlog.cli.render" in cycle for cycle in cycles), cycles


def test_the_layer_contract_holds() -> None:
    done = lint_imports(REPO / "src")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BROKEN" not in done.stdout and "KEPT" in done.stdout


def test_the_layer_contract_fails_on_an_upward_import(violating_copy: Path) -> None:
    done = lint_imports(violating_copy)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "agentlog.core.events -> agentlog.cli.render" in done.stdout


def test_modules_are_small_and_few_sit_at_the_root() -> None:
    sizes = {path.relative_to(PACKAGE).as_posix(): len(path.read_text().splitlines())
             for path in PACKAGE.rglob("*.py")}
    assert {name: lines for name, lines in sizes.items() if lines > MAX_LINES} == {}
    root_modules = sorted(name for name in sizes if "/" not in name)
    assert len(root_modules) <= MAX_ROOT_MODULES, root_modules


def test_no_benchmark_or_peer_code_ships_in_the_package() -> None:
    assert not (PACKAGE / "bench").exists()
    assert (REPO / "benchmarks" / "__main__.py").is_file()
    shipped = {path.name for path in PACKAGE.rglob("*")}
    assert not shipped & {"workload.py", "runner.py", "peers.py", "fidelity_probes.json"}, shipped
