"""``agentlog scrub`` end to end on JSONL (raw and zstd) and SQLite: after it no file the store owns
holds the secret; the sessions load, verify, search and fork; the scrub record is kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog import Recorder
from agentlog.cli.main import cli
from agentlog.errors import SessionLockedError
from agentlog.ops.scrub import scrub, scrub_journal, secret_locations
from agentlog.ops.scrub_text import Secrets
from agentlog.ops.search import search_store as search
from agentlog.store.base import Store
from agentlog.store.urls import open_store
from tests.dsh_reader import read_dsh_file
from tests.ops.scrub_sessions import OTHER, SECRET, record
from tests.store.pg_worker import Schema

URLS = {"jsonl-raw": "jsonl://{root}?compression=none", "jsonl-zstd": "jsonl://{root}",
        "sqlite": "sqlite://{root}/sessions.db", "postgres": ""}
_SCHEMAS: dict[str, Schema] = {}


@pytest.fixture(params=sorted(URLS))
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        schema = Schema.new()
        _SCHEMAS[schema.url] = schema
        yield schema.url
        schema.drop()
        return
    root = tmp_path / "store"
    root.mkdir(mode=0o700)
    yield URLS[request.param].format(root=root)


def _rows_holding(schema: Schema, secret: str) -> list[str]:
    """Every row of every table of the schema that holds ``secret`` (zstd-compressed data decoded)."""
    import zstandard

    found = []
    for (table,) in schema.sql("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema.name,)):
        for (row,) in schema.sql(f'SELECT to_jsonb(t)::text FROM {{s}}."{table}" AS t'):
            if secret in row:
                found.append(f"{table}: {row[:80]}")
        if table == "events":
            for (blob,) in schema.sql("SELECT data_zstd FROM {s}.events WHERE data_zstd IS NOT NULL"):
                if secret.encode() in zstandard.ZstdDecompressor().decompress(blob):
                    found.append("events.data_zstd")
    return found


def _family(store: Store) -> None:
    """A parent with a fork by reference (and the fork's own secret), the parent compacted."""
    record(store, "p")
    store.fork("p", None, "c").close()
    with store.open("c") as live:
        recorder = Recorder(live)
        with recorder.turn() as turn, turn.step() as step:
            step.user_message(f"child: {SECRET}")
            step.assistant()


def _files(url: str) -> Iterator[Path]:
    if url in _SCHEMAS:
        return
    root = Path(url.split("://", 1)[1].split("?")[0])
    root = root if root.is_dir() else root.parent
    yield from (path for path in root.rglob("*") if path.is_file())


def _holding(url: str, *secrets: str) -> list[str]:
    if url in _SCHEMAS:
        return [row for secret in secrets for row in _rows_holding(_SCHEMAS[url], secret)]
    return [str(path) for path in _files(url) for secret in secrets
            if secret.encode() in path.read_bytes()]


def _stored_holds(url: str, secret: str) -> bool:
    with open_store(url) as store:
        return secret in json.dumps([event.to_wire() for event in store.inspect("p").events], default=list)


def test_scrubbing_a_fork_scrubs_every_file_and_keeps_the_log_valid(url: str) -> None:
    with open_store(url) as store:
        _family(store)
        counts = {sid: len(store.inspect(sid).events) for sid in ("p", "c")}
    if not url.startswith("jsonl://") or "compression=none" in url:  # zstd frames hide it from a byte scan
        assert _holding(url, SECRET, OTHER)
    with open_store(url) as store:
        assert search(store, SECRET[:12]).hits  # the index holds it before
        report = scrub(store, ["c"], Secrets.of([(SECRET, "key")], ["hunter2-[a-z0-9-]+"]))
        by_id = {entry.session_id: entry for entry in report.sessions}
        assert by_id["p"].until is not None and "prefix c inherits" in by_id["p"].why
    assert _holding(url, SECRET, OTHER) == []
    with open_store(url) as store:
        for sid in ("p", "c"):
            assert len(store.load(sid).events) == counts[sid]
            assert store.inspect(sid, trust_checkpoint=False).recovery is None
            assert store.check_integrity(sid).status == "checked"
            assert scrub_journal(store, sid)[-1]["seqs"]
            assert SECRET not in json.dumps(scrub_journal(store, sid))
        assert not search(store, SECRET[:12]).hits
        assert search(store, "SCRUBBED:key").hits
        store.fork("c", None, "g").close()
        assert len(store.load("g").events) >= counts["c"]


def test_scrubbing_a_parent_covers_its_forks(url: str) -> None:
    with open_store(url) as store:
        _family(store)
        store.materialize("c")  # a full copy of the prefix: scrubbed too
        report = scrub(store, ["p"], Secrets.of([(SECRET, "key"), (OTHER, "pw")]))
        assert {entry.session_id: entry.why for entry in report.sessions}["c"] == "a fork of p"
    assert _holding(url, SECRET, OTHER) == []


def test_dry_run_changes_no_byte(url: str) -> None:
    with open_store(url) as store:
        _family(store)
    before = {path: path.read_bytes() for path in _files(url)}
    with open_store(url) as store:
        report = scrub(store, ["p"], Secrets(), from_audit=True, dry_run=True)
        assert report.sessions[0].seqs and report.sessions[0].removed == {"openai-key": 37}
    assert {path: path.read_bytes() for path in _files(url)} == before


def test_refused_while_another_process_writes(url: str) -> None:
    with open_store(url) as store:
        record(store, "p", compact=False)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom agentlog.store.urls import open_store\n"
        f"s = open_store({url!r}); live = s.open('p'); print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, cwd=os.getcwd())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        with open_store(url) as store, pytest.raises(SessionLockedError, match="cannot scrub"):
            scrub(store, ["p"], Secrets.of([(SECRET, "key")]))
        result = CliRunner().invoke(cli, ["--store", url, "scrub", "p", "--secret-from-audit"])
        assert result.exit_code != 0 and "cannot scrub" in result.output and "Traceback" not in result.output
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert _stored_holds(url, SECRET)  # nothing was changed


def test_the_cli_dry_run_then_scrub_then_verify(url: str, tmp_path: Path) -> None:
    with open_store(url) as store:
        record(store, "p", compact=False)
    secrets = tmp_path / "secrets.txt"
    secrets.write_text(f"{OTHER}\n\n")
    runner = CliRunner()
    command = ["--store", url, "scrub", "p", "--secret-from-audit", "--text-file", str(secrets)]
    dry = runner.invoke(cli, [*command, "--dry-run"])
    assert dry.exit_code == 0 and "would scrub" in dry.output and "nothing written" in dry.output
    assert _stored_holds(url, SECRET) and _stored_holds(url, OTHER)
    done = runner.invoke(cli, [*command, "--json"])
    assert done.exit_code == 0, done.output
    shape = json.loads(done.output)
    assert shape["sessions"][0]["removed"] == {"openai-key": 23, "text": 12}
    assert bool(shape["caveats"]) == (url in _SCHEMAS)  # PostgreSQL's dead tuples, WAL, replicas, backups
    assert _holding(url, SECRET, OTHER) == []
    verified = runner.invoke(cli, ["--store", url, "verify", "p", "--json"])
    shape = json.loads(verified.output)
    assert verified.exit_code == 0 and shape["status"] == "ok" and len(shape["scrubs"]) == 1
    assert all(len(item["hmacSha256"]) == 64 for item in shape["scrubs"][0]["removed"])
    bad = runner.invoke(cli, ["--store", url, "scrub", "p", "--pattern", "(x"])
    assert bad.exit_code != 0 and "not a regular expression" in bad.output and "Traceback" not in bad.output


def test_audit_lists_where_each_secret_occurs(url: str) -> None:
    with open_store(url) as store:
        _family(store)
        located = secret_locations(store, ["p"])
    assert [item["kind"] for item in located] == ["openai-key"]
    assert SECRET not in json.dumps(located)
    places = {place["id"]: place for place in located[0]["sessions"]}
    assert set(places) == {"p", "c"} and places["p"]["header"] and 2 in places["p"]["seqs"]
    result = CliRunner().invoke(cli, ["--store", url, "audit", "p", "--rotation"])
    assert "secrets to rotate: 1" in result.output and SECRET not in result.output


@pytest.mark.parametrize("point", ["before-rename", "after-rename"])
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_sigkill_during_the_rewrite_leaves_the_old_or_the_new_session(tmp_path: Path, point: str,
                                                                       compression: str) -> None:
    url = f"jsonl://{tmp_path / 'store'}?compression={compression}"
    with open_store(url) as store:
        record(store, "p")
        count = len(store.inspect("p").events)
    worker = subprocess.run([sys.executable, "-m", "tests.ops.scrub_worker", url, "p", SECRET, point],
                            cwd=os.getcwd(), capture_output=True, check=False)
    assert worker.returncode == -9, worker.stderr
    with open_store(url) as store:
        stored = store.load("p")  # old or new, never broken
        assert len(stored.events) == count and store.inspect("p", trust_checkpoint=False).recovery is None
        scrub(store, ["p"], Secrets.of([(SECRET, "key")]))  # the next scrub finishes the job
        # killed after the rename, the new transcript has no digests yet: unchecked, never damaged
        assert store.check_integrity("p").status == ("checked" if point == "before-rename" else "none")
    assert _holding(url, SECRET) == []
    assert not [path for path in _files(url) if path.name.endswith(".tmp")]
    if True:
        names = ("session.jsonl", "session.jsonl.zstd")
        transcript = next(path for path in _files(url) if path.name in names)
        assert len(read_dsh_file(transcript).events()) == count  # DSH's reader reads it


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_torn_tails_side_file_is_scrubbed(tmp_path: Path, compression: str) -> None:
    import zstandard

    url = f"jsonl://{tmp_path / 'store'}?compression={compression}"
    with open_store(url) as store:
        record(store, "p", compact=False)
        path = Path(store.locate(store.inspect("p").header) or "")
    line = ('{"type":"user/message","seq":999,"time":1,"data":{"text":"' + SECRET + " " + "x" * 300).encode()
    torn = line if compression == "none" else zstandard.ZstdCompressor().compress(line + b"\n")[:-6]
    with open(path, "ab") as handle:
        handle.write(torn)
    with open_store(url) as store:
        scrub(store, ["p"], Secrets.of([(SECRET, "key")]))
        kept = [side for side in path.parent.iterdir() if ".torn-at-" in side.name]
        assert len(kept) == 1  # the repair kept the cut bytes, the scrub rewrote them
    if compression == "none":
        assert b"[SCRUBBED:key] " + b"x" * 300 in kept[0].read_bytes()
    assert _holding(url, SECRET) == []
    kept[0].write_bytes(line)  # a copy that still holds it, beside a log that no longer does
    with open_store(url) as store:
        report = scrub(store, ["p"], Secrets.of([(SECRET, "key")]))
    assert not report.sessions[0].changed and report.sessions[0].notes
    assert _holding(url, SECRET) == []


def test_a_side_file_of_zstd_frames_and_cut_bytes_is_scrubbed_in_both(tmp_path: Path) -> None:
    import zstandard

    from agentlog.ops.scrub_text import Matcher, scrub_text
    from agentlog.store.jsonl.scrub import scrub_side_file

    side = tmp_path / "session.jsonl.zstd.torn-at-10"
    frame = zstandard.ZstdCompressor().compress(f"line with {SECRET}\n".encode())
    side.write_bytes(frame + f"cut {SECRET}".encode())
    matcher = Matcher(Secrets.of([(SECRET, "key")]))
    assert scrub_side_file(side, lambda text: scrub_text(matcher, text))
    data = side.read_bytes()
    decoder = zstandard.ZstdDecompressor().decompressobj()
    assert decoder.decompress(data) == b"line with [SCRUBBED:key]\n"
    assert decoder.unused_data == b"cut [SCRUBBED:key]" and SECRET.encode() not in data
    assert not scrub_side_file(side, lambda text: scrub_text(matcher, text))  # nothing left to change


def test_the_postgres_caveats_are_printed() -> None:
    schema = Schema.new()
    try:
        with open_store(schema.url) as store:
            record(store, "p", compact=False)
        result = CliRunner().invoke(cli, ["--store", schema.url, "scrub", "p", "--secret-from-audit"])
        assert result.exit_code == 0, result.output
        assert "caveat: PostgreSQL keeps the old row versions" in result.output
        assert "replicas" in result.output and "snapshots" in result.output
        assert "VACUUM done" in result.output
    finally:
        schema.drop()


def test_a_memory_store_is_refused() -> None:
    from agentlog import MemoryStore
    from agentlog.errors import UsageError

    store = MemoryStore()
    record(store, "p", compact=False)
    with pytest.raises(UsageError, match="memory store keeps none"):
        scrub(store, ["p"], Secrets.of([(SECRET, "key")]))


def test_the_checkpoint_sidecar_is_rebuilt_without_the_secret(tmp_path: Path) -> None:
    from agentlog.core.session import Session
    from agentlog.store.jsonl.store import JsonlStore

    root = tmp_path / "store"
    with JsonlStore(root, compression="none", checkpoint_bytes=1) as store:
        record(store, "p")
        store.load("p")
    checkpoint = next(root.rglob("*.ckpt"))
    before = checkpoint.read_bytes()
    with JsonlStore(root, compression="none", checkpoint_bytes=1) as store:
        scrub(store, ["p"], Secrets.of([(SECRET, "key"), (OTHER, "pw")]))
    assert checkpoint.exists() and checkpoint.read_bytes() != before  # written again by the load after
    assert _holding(f"jsonl://{root}", SECRET, OTHER) == []
    with JsonlStore(root, compression="none", checkpoint_bytes=1) as store:
        resumed = store.inspect("p")  # resumes from the checkpoint: its surface is the scrubbed one
        messages = Session.restore("p", resumed.events, resumed.header).derive_messages()
    shown = json.dumps(messages, default=list)
    assert SECRET not in shown and "[SCRUBBED:key]" in shown
