"""The public API: ``agentlog.__all__`` is complete, ordered and importable; ``py.typed`` ships."""

from __future__ import annotations

import ast
import re
import tomllib
from importlib import resources
from pathlib import Path

import agentlog

INIT = Path(agentlog.__file__)
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def public_names_defined_in_init() -> list[str]:
    """Names ``agentlog/__init__.py`` imports or assigns (``__version__`` included), in file order."""
    names: list[str] = []
    for node in ast.parse(INIT.read_text()).body:
        if isinstance(node, ast.ImportFrom):
            names += [alias.asname or alias.name for alias in node.names]
        elif isinstance(node, ast.Assign):
            names += [target.id for target in node.targets if isinstance(target, ast.Name)]
    names += list(agentlog._LAZY)  # imported on first access
    return [
        name for name in names
        if name not in ("__all__", "TYPE_CHECKING") and (not name.startswith("_") or name == "__version__")
    ]


def isort_style_key(name: str) -> tuple[int, list[object]]:
    """Ruff's RUF022 order: SCREAMING_CASE, then CamelCase, then the rest; natural sort within each."""
    if name.upper() == name and any(char.isalpha() for char in name):
        group = 0
    elif name[0].isupper():
        group = 1
    else:
        group = 2
    natural = [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
    return group, natural


def test_all_lists_exactly_the_public_names_of_init() -> None:
    defined = public_names_defined_in_init()
    assert len(defined) == len(set(defined))
    assert set(agentlog.__all__) == set(defined)


def test_all_is_sorted_constants_then_classes_then_functions() -> None:
    assert agentlog.__all__ == sorted(agentlog.__all__, key=isort_style_key)


def test_every_exported_name_resolves() -> None:
    for name in agentlog.__all__:
        assert getattr(agentlog, name) is not None
    namespace: dict[str, object] = {}
    exec("from agentlog import *", namespace)
    assert set(agentlog.__all__) <= set(namespace)


def test_version_matches_the_distribution() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert agentlog.__version__ == project["version"]


def test_py_typed_marker_ships_with_the_package() -> None:
    assert resources.files("agentlog").joinpath("py.typed").is_file()
    package_data = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["agentlog"]


def test_import_agentlog_loads_the_core_only() -> None:
    """Compaction, audit, import, export, upgrade checks and the database stores (and asyncio
    with ssl, sqlite3) load on first use: a resumed session's memory budget (issue 15) has no
    room for what a program never calls."""

    probe = ("import sys, agentlog\n"
             "heavy = ('asyncio', 'ssl', 'agentlog.compaction', 'agentlog.audit', 'agentlog.io.importers',"
             " 'agentlog.io.exporters', 'agentlog.store.postgres.store', 'agentlog.store.sqlite.store',"
             " 'sqlite3', 'agentlog.ops.upgrade')\n"
             "print(sorted(name for name in sys.modules if name.startswith(heavy)))\n"
             "agentlog.Compactor, agentlog.export_session, agentlog.IMPORTERS\n"
             "print('agentlog.compaction.engine' in sys.modules, 'asyncio' in sys.modules)\n")
    assert _printed(probe) == ["[]", "True True"]


def test_import_agentlog_loads_only_the_errors_until_a_name_is_used() -> None:
    """``import agentlog`` is a fixed cost of every program and CLI run (issue 30: at most
    80 ms): it loads ``agentlog.errors`` and ``agentlog.version`` only; the first use of a name
    loads its module, and the name is then the module's own object."""

    probe = ("import sys, agentlog\n"
             "print(sorted(name for name in sys.modules if name.startswith('agentlog.')))\n"
             "from agentlog import Session, open_store\n"
             "import agentlog.core.session as core, agentlog.store.urls as urls\n"
             "print(Session is core.Session, open_store is urls.open_store, 'Session' in vars(agentlog))\n")
    assert _printed(probe) == ["['agentlog.errors', 'agentlog.version']", "True True True"]


def _printed(probe: str) -> list[str]:
    """The lines a fresh interpreter prints running ``probe`` (imports measured from scratch)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()
