"""``agentlog export``: every format through click's runner and a real process; the store is never changed."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentlog import SessionHeader, open_store
from agentlog.cli.main import cli
from agentlog.io.exporters import EXPORTERS
from tests.io.exporters.sessions import sample_session

LEAK = " AKIAIOSFODNN7EXAMPLE sk-proj-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789 \x1b[2J\x1b]0;pwned\x07 \u202eevil"


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"jsonl://{tmp_path / 'store'}"
    with open_store(url).start(SessionHeader(id="s1", cwd="/w")) as live:
        for event in sample_session(text=LEAK).events:
            live.session.append(event.type, event.data, surface_op=event.surface_op,
                                source_event_seqs=event.source_event_seqs)
    return url


def files_of(url: str) -> dict[str, str]:
    root = Path(url.removeprefix("jsonl://"))
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file()}


def invoke(url: str, *args: str) -> tuple[int, bytes, str]:
    result = CliRunner().invoke(cli, ["--store", url, "export", *args])
    return result.exit_code, result.stdout_bytes, result.stderr


@pytest.mark.parametrize("fmt", list(EXPORTERS))
def test_every_format_exports_and_redacts_without_touching_the_store(store: str, fmt: str) -> None:
    before = files_of(store)
    code, plain, _ = invoke(store, "s1", "--format", fmt)
    assert code == 0 and b"AKIAIOSFODNN7EXAMPLE" in plain
    code, redacted, _ = invoke(store, "s1", "--format", fmt, "--redact")
    assert code == 0
    assert b"AKIAIOSFODNN7EXAMPLE" not in redacted and b"sk-proj-Ab3dEf" not in redacted
    assert b"[REDACTED:aws-access-key]" in redacted and b"[REDACTED:openai-key]" in redacted
    if fmt in ("openai-chat", "anthropic"):
        assert json.loads(redacted)["messages"]
    assert files_of(store) == before  # byte for byte


def test_views_choose_the_surface_or_the_transcript(store: str) -> None:
    _, surface, _ = invoke(store, "s1", "--format", "markdown", "--surface")
    _, log, _ = invoke(store, "s1", "--format", "markdown", "--log")
    assert b"user \xc2\xb7 compact" in surface and b"Summary" in surface
    assert b"Summary" not in log and b"Why does the test fail?" in log
    _, default, _ = invoke(store, "s1", "--format", "markdown")
    assert default == log


def test_output_file_is_written_whole(store: str, tmp_path: Path) -> None:
    target = tmp_path / "out.html"
    target.write_text("old")
    result = CliRunner().invoke(cli, ["--store", store, "export", "s1", "--format", "html",
                                      "-o", str(target)])
    assert result.exit_code == 0, result.output
    page = target.read_text()
    assert page.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in page
    assert f"bytes (html) to {target}" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.html", "store"]  # no temp file left


def test_errors_are_one_line_and_name_what_was_wrong(store: str, tmp_path: Path) -> None:
    code, _, err = invoke(store, "nope", "--format", "markdown")
    assert code == 1 and 'session "nope"' in err and "not found" in err and "Traceback" not in err
    code, _, err = invoke(store, "s1", "--format", "jsonl", "--log")
    assert code == 1 and "the jsonl export is the whole log" in err
    code, _, err = invoke(store, "s1", "--format", "pdf")
    assert code == 2 and "'pdf' is not one of" in err
    code, _, err = invoke(store, "s1", "--format", "html", "-o", str(tmp_path / "missing-dir" / "x.html"))
    assert code == 1 and "missing-dir" in err and "Traceback" not in err
    code, _, err = invoke(f"jsonl://{tmp_path / 'no-store'}", "s1", "--format", "html")
    assert code == 1 and "no store at" in err
    assert not (tmp_path / "no-store").exists()


def _env(url: str) -> dict[str, str]:
    return {**os.environ, "AGENTLOG_STORE": url, "COLUMNS": "200"}


def test_a_real_process_exports_a_request_body(store: str) -> None:
    result = subprocess.run([sys.executable, "-m", "agentlog.cli", "export", "s1", "--format", "openai-chat",
                             "--redact"], capture_output=True, env=_env(store), timeout=120)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["messages"][0] == {"role": "system", "content": "You are a careful coding agent."}
    assert "[REDACTED:openai-key]" in body["messages"][-1]["content"]


def on_a_terminal(args: list[str], env: dict[str, str]) -> bytes:
    """What a process writes to a pseudo-terminal (its stdout is a tty there)."""
    master, slave = pty.openpty()
    process = subprocess.Popen(args, stdout=slave, stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    process.wait(timeout=120)
    os.close(master)
    return b"".join(chunks).replace(b"\r\n", b"\n")


@pytest.mark.parametrize("fmt", list(EXPORTERS))
def test_a_terminal_never_receives_control_sequences(store: str, fmt: str) -> None:
    args = [sys.executable, "-m", "agentlog.cli", "export", "s1", "--format", fmt]
    shown = on_a_terminal(args, _env(store))
    assert shown
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw.encode() not in shown, (fmt, raw)
    if fmt in ("openai-chat", "anthropic"):  # JSON escapes: the same value once parsed
        piped = subprocess.run(args, capture_output=True, env=_env(store), timeout=120).stdout
        assert b"\x1b" not in piped or fmt == "jsonl"
        assert json.loads(shown) == json.loads(piped)


def test_an_export_is_never_written_into_the_store(store: str, tmp_path: Path) -> None:
    before = files_of(store)
    transcript = open_store(store, create=False).locate(open_store(store, create=False).inspect("s1").header)
    assert transcript is not None
    for target in (transcript, str(Path(store.removeprefix("jsonl://")) / "notes.md")):
        code, _, err = invoke(store, "s1", "--format", "jsonl", "-o", target)
        assert code == 1 and "refusing to write the export" in err and "inside the store" in err
    assert files_of(store) == before
    sqlite = f"sqlite://{tmp_path / 'db' / 'sessions.db'}"
    with open_store(sqlite).start(SessionHeader(id="s1")) as live:
        live.session.append("turn/start", {"turn": 1})
    for target in ("sessions.db", "sessions.db-wal"):
        result = CliRunner().invoke(cli, ["--store", sqlite, "export", "s1", "--format", "markdown", "-o",
                                          str(tmp_path / "db" / target)])
        assert result.exit_code == 1 and "inside the store" in result.stderr
    beside = tmp_path / "db" / "s1.md"  # next to the database is fine
    result = CliRunner().invoke(cli, ["--store", sqlite, "export", "s1", "--format", "markdown",
                                      "-o", str(beside)])
    assert result.exit_code == 0 and beside.read_text().startswith("# Session `s1`")


def test_json_says_what_was_written_and_needs_a_file(store: str, tmp_path: Path) -> None:
    target = tmp_path / "out.md"
    code, out, _ = invoke(store, "s1", "--format", "markdown", "--redact", "-o", str(target), "--json")
    assert code == 0 and json.loads(out) == {"id": "s1", "format": "markdown", "view": None, "redacted": True,
                                             "bytes": target.stat().st_size, "file": str(target)}
    code, _, err = invoke(store, "s1", "--format", "markdown", "--json")
    assert code == 2 and "use it with -o FILE" in err


def test_an_output_in_a_missing_directory_is_named_as_given(store: str, tmp_path: Path) -> None:
    target = tmp_path / "missing" / "out.html"
    code, _, err = invoke(store, "s1", "--format", "html", "-o", str(target))
    assert code == 1 and "Traceback" not in err
    assert str(target) in err and ".tmp" not in err, err  # not the temp file it never asked for
