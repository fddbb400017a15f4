"""``agentlog check-upgrade``: every session listed, read and restored by this version, on a copy."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from agentlog import JsonlStore, SessionHeader, Store, open_store
from agentlog.store.jsonl.zstd_frames import scan_zstd_frames
from tests.cli.conftest import crash, invoke, record, run


def _damage_header(store: Store, session_id: str) -> None:
    """The session's header made unreadable (a zstd frame checksum, a raw line, a row)."""
    if isinstance(store, JsonlStore):
        path = Path(store.locate(SessionHeader(id=session_id, cwd="/work/project")))
        data = bytearray(path.read_bytes())
        if store.compressed:
            _start, end = scan_zstd_frames(bytes(data), max_frames=1).frames[0]
            data[end - 1] ^= 0x5A
        else:
            data[: data.index(b"\n")] = b"{this is not a header"
        path.write_bytes(bytes(data))
    elif store.name == "sqlite":
        with sqlite3.connect(store.path) as conn:  # type: ignore[attr-defined]
            conn.execute("UPDATE sessions SET incarnation = 'not-a-uuid' WHERE id = ?", (session_id,))
    else:
        import psycopg

        with psycopg.connect(store.dsn, autocommit=True) as conn:  # type: ignore[attr-defined]
            conn.execute(f'UPDATE "{store.schema}".sessions SET version = 99 '  # type: ignore[attr-defined]
                         "WHERE id = %s", (session_id,))


def test_check_upgrade_reports_each_session_and_changes_nothing(store_url: str) -> None:
    record(store_url, "good")
    crash(store_url, "crashed")
    before = invoke(store_url, "inspect", "crashed", "--json").stdout
    checked = invoke(store_url, "check-upgrade", "--json")
    assert checked.exit_code == 0, checked.output
    shape = json.loads(checked.stdout)
    assert shape["ok"] is True and shape["store"] == store_url
    assert (shape["copy"] is None) == store_url.startswith("postgresql")
    statuses = {each["id"]: (each["status"], each["detail"]) for each in shape["sessions"]}
    assert statuses["good"] == ("ok", "")
    assert statuses["crashed"] == ("repaired", "interrupted turn 1 closed by 1 events")
    assert invoke(store_url, "inspect", "crashed", "--json").stdout == before  # the repair went to the copy
    assert invoke(store_url, "verify", "crashed").exit_code == 2
    if shape["copy"] is not None:
        assert not Path(shape["copy"]).exists()  # the copy is removed afterwards


def test_check_upgrade_names_a_session_that_would_not_load(store_url: str) -> None:
    record(store_url, "good")
    record(store_url, "broken")
    with open_store(store_url) as store:
        _damage_header(store, "broken")
    checked = run(store_url, "check-upgrade")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    rows = {line.split()[0]: line for line in checked.stdout.splitlines()[1:-1]}
    assert rows["good"].split()[1] == "ok"
    failing = [line for key, line in rows.items() if key != "good"]
    assert len(failing) == 1 and " fails " in failing[0]
    assert "1 would not load" in checked.stdout


def test_check_upgrade_of_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nothing-here"
    result = invoke(f"jsonl://{missing}", "check-upgrade")
    assert result.exit_code == 1 and "no store at" in result.stderr
    assert not missing.exists()


def _rows(schema: Any) -> list[list[tuple[Any, ...]]]:
    """Every row of the store's tables, in a stable order."""
    return [schema.sql(f"SELECT * FROM {{s}}.{table} ORDER BY 1, 2") for table in ("sessions", "events")] + [
        schema.sql("SELECT * FROM {s}.meta ORDER BY 1")]


def test_check_upgrade_on_postgres_reads_one_read_only_snapshot_and_blocks_no_writer() -> None:
    from agentlog.ops.upgrade import check_upgrade
    from agentlog.store.postgres.store import PostgresStore
    from tests.store.pg_worker import Schema

    schema = Schema.new()
    try:
        for sid in ("a", "b", "c"):
            record(schema.url, sid)
        crash(schema.url, "crashed")
        before = _rows(schema)
        assert check_upgrade(schema.url).to_json()["ok"] is True
        assert _rows(schema) == before  # row for row: nothing written, not even the repair

        writes: list[str] = []

        def meanwhile(done: int, total: int) -> None:
            if done != 1:
                return
            worker = threading.Thread(target=lambda: (_delete(schema.url, "b"), record(schema.url, "d"),
                                                      writes.append("done")))
            worker.start()
            worker.join(timeout=30)
            assert writes == ["done"]  # the writer was not blocked by the check's transaction

        report = check_upgrade(schema.url, progress=meanwhile)
        statuses = {check.session_id: check.status for check in report.sessions}
        assert statuses == {"a": "ok", "b": "ok", "c": "ok", "crashed": "repaired"}  # one snapshot
        with open_store(schema.url) as store:
            assert sorted(header.id for header in store.list()) == ["a", "c", "crashed", "d"]
            assert isinstance(store, PostgresStore)
            with store.read_snapshot(), store._reading() as conn:
                assert conn.execute("SHOW transaction_read_only").fetchone() == ("on",)
                assert conn.execute("SHOW transaction_isolation").fetchone() == ("repeatable read",)
    finally:
        schema.drop()


def _delete(url: str, session_id: str) -> None:
    with open_store(url) as store:
        store.delete(session_id)


def test_check_upgrade_on_postgres_reports_what_a_copy_reports(tmp_path: Path) -> None:
    from agentlog.ops.upgrade import check_upgrade
    from tests.store.pg_worker import throwaway_url

    copied = f"sqlite://{tmp_path / 'sessions.db'}"
    with throwaway_url() as in_place:
        for url in (copied, in_place):
            record(url, "good")
            crash(url, "crashed")
        on_copy, on_snapshot = check_upgrade(copied).to_json(), check_upgrade(in_place).to_json()
    assert on_copy["copy"] is not None and on_snapshot["copy"] is None
    assert on_snapshot["sessions"] == on_copy["sessions"]
