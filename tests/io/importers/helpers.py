"""What every importer test does: import a file, check the result as a store would, compare goldens."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from agentlog import MemoryStore, Session, check_invariants
from agentlog.io.importers import IMPORTERS, Imported, SourceFile, save_imported

FIXTURES = Path(__file__).parent / "fixtures"


def import_file(fmt: str, path: Path) -> list[Imported]:
    """The sessions ``fmt``'s importer makes of ``path``."""
    return IMPORTERS[fmt](SourceFile(str(path), path.read_bytes()))


def checked(imported: Imported) -> Session:
    """Restore the imported log (full validation), check its invariants, store and load it back."""
    session = Session.restore(imported.header.id, [event.to_wire() for event in imported.events],
                              imported.header)
    check_invariants(session.events)
    with MemoryStore() as store:
        assert save_imported(store, imported) == "imported"
        loaded = store.inspect(imported.header.id)
        assert loaded.recovery is None  # balanced: nothing to repair
        assert list(loaded.events) == list(imported.events)
    return session


def golden_lines(sessions: list[Imported]) -> bytes:
    """Headers, events and unmapped counts as JSON lines: the shape a golden file holds."""
    lines = []
    for imported in sessions:
        lines.append(orjson.dumps({"header": imported.header.to_wire(), "unmapped": dict(imported.unmapped)},
                                  default=dict))
        lines.extend(event.to_json() for event in imported.events)
    return b"\n".join(lines) + b"\n"


def assert_golden(sessions: list[Imported], name: str) -> None:
    """Compare with ``fixtures/golden/<name>.jsonl`` (``AGENTLOG_UPDATE_GOLDEN=1`` rewrites it)."""
    path = FIXTURES / "golden" / f"{name}.jsonl"
    actual = golden_lines(sessions)
    if os.environ.get("AGENTLOG_UPDATE_GOLDEN") == "1":
        path.write_bytes(actual)
    assert actual == path.read_bytes()
