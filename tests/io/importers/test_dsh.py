"""DSH transcripts: imported events are exactly what DSH wrote; placed where the JSONL store expects."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import orjson
import pytest

from agentlog import SourceFormatError, open_store
from agentlog.io.importers import SourceFile, save_imported
from agentlog.io.importers.dsh import import_dsh
from tests.conftest import SHARED_DATA, shared_data_dir
from tests.io.importers.dsh_store import write_dsh_store

MANIFEST = json.loads((SHARED_DATA / "dsh-fixtures" / "manifest.json").read_text()) \
    if (SHARED_DATA / "dsh-fixtures").is_dir() else []
SNAPSHOTS = sorted(str(p.relative_to(SHARED_DATA)) for p in (SHARED_DATA / "transcripts" / "deepseek-harness")
                   .rglob("*.jsonl")) if SHARED_DATA.is_dir() else []


def _import(path: Path) -> tuple[object, list[bytes]]:
    (imported,) = import_dsh(SourceFile(str(path), path.read_bytes()))
    return imported, [event.to_json() for event in imported.events]


@pytest.mark.parametrize("entry", MANIFEST, ids=lambda entry: entry["name"])
def test_every_dsh_fixture_imports_the_events_dsh_wrote(entry: dict[str, object]) -> None:
    root = shared_data_dir() / "dsh-fixtures"
    imported, lines = _import(root / str(entry["file"]))
    expected = (root / str(entry["expected"]["events"])).read_bytes().splitlines()  # type: ignore[index]
    assert lines == expected[: len(lines)]  # a crashed log: the prefix a load reads before its repair
    assert len(expected) - len(lines) <= 3
    torn = "torn" in str(entry["file"]) and "after-repair" not in str(entry["file"])
    assert bool(imported.unmapped) == torn  # type: ignore[attr-defined]


def test_a_dsh_file_lands_where_the_jsonl_store_expects_it_byte_for_byte(tmp_path: Path) -> None:
    root = shared_data_dir() / "dsh-fixtures"
    (imported,) = import_dsh(SourceFile("x", (root / "basic-T5.zstd-unpacked.jsonl.zstd").read_bytes()))
    with open_store(f"jsonl://{tmp_path}?compression=none") as store:
        assert save_imported(store, imported) == "imported"
    placed = tmp_path / "--home-user-project--" / "fx-basic-t5" / "session.jsonl"
    assert placed.read_bytes() == (root / "basic-T5.raw-packed.jsonl").read_bytes()


@pytest.mark.parametrize("relative", SNAPSHOTS)
def test_snapshot_templates_are_refused_then_import_once_filled(relative: str, tmp_path: Path) -> None:
    path = shared_data_dir() / relative
    with pytest.raises(SourceFormatError, match=r"template placeholder \{\{(cwd|sessionId)\}\}") as caught:
        import_dsh(SourceFile(str(path), path.read_bytes()))
    assert caught.value.file == str(path) and "line 1" in str(caught.value)
    head, _, rest = path.read_bytes().partition(b"\n")
    header = orjson.loads(head.replace(b"{{cwd}}", b"/home/user/project").replace(b"{{sessionId}}", b"snap"))
    (imported,) = import_dsh(SourceFile("filled.jsonl", orjson.dumps(header) + b"\n" + rest))
    with open_store(f"jsonl://{tmp_path}") as store:
        save_imported(store, imported)
        assert len(store.inspect(imported.header.id).events) == len(imported.events)


def test_a_dsh_sqlite_store_imports_every_session_it_holds(tmp_path: Path) -> None:
    root = shared_data_dir() / "dsh-fixtures"
    parent, _ = _import(root / "fork-parent-T5.raw-packed.jsonl")
    child, _ = _import(root / "fork-child.raw-packed.jsonl")
    crashed, _ = _import(root / "crash-midturn.raw-packed.jsonl")
    sessions = [parent, child, crashed]
    database = tmp_path / "dsh.db"
    write_dsh_store(database, [(s.header, s.events) for s in sessions])  # type: ignore[attr-defined]
    before = database.read_bytes()
    imported = import_dsh(SourceFile(str(database), before))
    assert [s.header.id for s in imported] == ["fx-fork-parent", "fx-fork-child", "fx-crash-midturn"]
    for got, want in zip(imported, sessions, strict=True):
        assert list(got.events) == list(want.events)  # type: ignore[attr-defined]
        assert got.header.parent_session == want.header.parent_session  # type: ignore[attr-defined]
    assert database.read_bytes() == before
    with open_store(f"sqlite://{tmp_path / 'agentlog.db'}") as store:
        assert [save_imported(store, s) for s in imported] == ["imported"] * 3
        assert len(store.load("fx-crash-midturn").events) == 999  # the load repairs the crashed turn


def test_other_sqlite_databases_are_refused(tmp_path: Path) -> None:
    database = tmp_path / "other.db"
    sqlite3.connect(database).execute("CREATE TABLE t(x)").connection.commit()
    with pytest.raises(SourceFormatError, match="id 0 and schema version 0; expected a DSH store"):
        import_dsh(SourceFile(str(database), database.read_bytes()))
    with pytest.raises(SourceFormatError, match="not a readable SQLite database"):
        import_dsh(SourceFile("x.db", b"SQLite format 3\x00" + b"\x00" * 50))
