"""Ctrl-C on the long commands: real processes sent SIGINT while their work is under way exit 130
with one line saying what was done, show no traceback, and leave the store whole.

Work is seen under way through the progress lines every long command prints on stderr when it is
not a terminal (``AGENTLOG_PROGRESS_INTERVAL=0``: one line at every step), or through the store's
files (gc's removals); no sleep is added to any command.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentlog import open_store
from tests.agent.conftest import provider, root
from tests.cli.conftest import REPO, record
from tests.integrations.server import Provider, sse

__all__ = ["provider", "root"]

SESSIONS = 300
STORES = {"jsonl": "jsonl://{root}", "sqlite": "sqlite://{root}/sessions.db"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, float]]:
    """Per backend, a store of SESSIONS sessions of 20 turns each (built once, copied per test)
    and when it was built."""
    template = tmp_path_factory.mktemp("template")
    record(f"jsonl://{template}", "template", turns=20)
    with open_store(f"jsonl://{template}") as store:
        stored = store.inspect("template")
    made: dict[str, tuple[Path, float]] = {}
    for kind, pattern in STORES.items():
        root = tmp_path_factory.mktemp(kind) / "store"
        with open_store(pattern.format(root=root)) as store:
            for number in range(SESSIONS):
                header = dataclasses.replace(stored.header, id=f"s{number:04d}")
                store.create(header)
                store.append(header.id, stored.events)
        made[kind] = (root, time.time())
    return made


def _store(built: dict[str, tuple[Path, float]], kind: str, tmp_path: Path) -> str:
    root = tmp_path / "store"
    shutil.copytree(built[kind][0], root)
    return STORES[kind].format(root=root)


def _environment(url: str, tmp_path: Path) -> dict[str, str]:
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    return {**os.environ, "AGENTLOG_STORE": url, "AGENTLOG_PROGRESS_INTERVAL": "0", "COLUMNS": "200",
            "PYTHONPATH": str(REPO), "TMPDIR": str(scratch)}


def interrupt_when(args: list[str], env: dict[str, str], under_way: Callable[[str], bool],
                   ) -> tuple[int, str, str]:
    """Run ``agentlog ARGS``, send SIGINT once a stderr line shows ``under_way``; status, stdout, stderr."""
    with subprocess.Popen([sys.executable, "-m", "agentlog.cli", *args], env=env, cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        assert process.stderr is not None
        seen = []
        for line in process.stderr:
            seen.append(line)
            if under_way(line):
                process.send_signal(signal.SIGINT)
                break
        out, rest = process.communicate(timeout=120)
    return process.returncode, out, "".join(seen) + rest


def _after(count: int, what: str) -> Callable[[str], bool]:
    """A progress line saying at least ``count`` of the sessions are ``what`` (searched, read, ...)."""
    def seen(line: str) -> bool:
        found = re.search(rf": (\d+) of {SESSIONS} sessions {what}$", line.rstrip())
        return found is not None and int(found.group(1)) >= count
    return seen


def _summary(err: str) -> str:
    assert "Traceback" not in err and "Aborted" not in err, err
    return err.strip().splitlines()[-1]


def _intact(url: str, expected: int | None = None) -> None:
    """Every session the store lists reads whole, with nothing to repair (what verify checks)."""
    with open_store(url, create=False) as store:
        listing = store.listing()
        assert not listing.unreadable
        if expected is not None:
            assert len(listing.snapshots) == expected
        for snapshot in listing.snapshots:
            assert store.inspect(snapshot.header.id, trust_checkpoint=False).recovery is None


@pytest.mark.parametrize("kind", list(STORES))
def test_search_interrupted_shows_the_matches_found_so_far(built: dict[str, tuple[Path, float]],
                                                           kind: str, tmp_path: Path) -> None:
    url = _store(built, kind, tmp_path)
    status, out, err = interrupt_when(["search", "README"], _environment(url, tmp_path),
                                      _after(3, "searched"))
    assert status == 130, err
    found = re.fullmatch(rf"search: interrupted after (\d+) of {SESSIONS} sessions; (\d+) matches shown",
                         _summary(err))
    assert found, err
    done, matches = int(found.group(1)), int(found.group(2))
    assert 3 <= done < SESSIONS
    rows = out.splitlines()[1:]  # under the column heads
    assert len(rows) == matches > 0 and {row.split()[0] for row in rows} <= {f"s{n:04d}" for n in range(done)}
    _intact(url, SESSIONS)


def test_search_json_interrupted_prints_no_partial_document(built: dict[str, tuple[Path, float]],
                                                            tmp_path: Path) -> None:
    url = _store(built, "jsonl", tmp_path)
    status, out, err = interrupt_when(["search", "README", "--json"], _environment(url, tmp_path),
                                      _after(3, "searched"))
    assert status == 130 and out == "", (out, err)
    assert re.fullmatch(r"search: interrupted after \d+ of \d+ sessions; \d+ match(es)? "
                        r"\(--json prints only a whole result\)", _summary(err)), err


@pytest.mark.parametrize("kind", list(STORES))
def test_stats_interrupted_shows_the_figures_of_the_sessions_read(built: dict[str, tuple[Path, float]],
                                                                  kind: str, tmp_path: Path) -> None:
    url = _store(built, kind, tmp_path)
    status, out, err = interrupt_when(["stats"], _environment(url, tmp_path), _after(3, "read"))
    assert status == 130, err
    found = re.fullmatch(rf"stats: interrupted after (\d+) of {SESSIONS} sessions; the figures of those "
                         "are shown", _summary(err))
    assert found, err
    done = int(found.group(1))
    assert 3 <= done < SESSIONS and f"total ({done} sessions)" in out
    _intact(url, SESSIONS)


@pytest.mark.parametrize("kind", list(STORES))
def test_check_upgrade_interrupted_removes_its_copy(built: dict[str, tuple[Path, float]], kind: str,
                                                    tmp_path: Path) -> None:
    url = _store(built, kind, tmp_path)
    env = _environment(url, tmp_path)
    status, out, err = interrupt_when(["check-upgrade"], env, _after(3, "checked"))
    assert status == 130, err
    found = re.fullmatch(rf"check-upgrade: interrupted after (\d+) of {SESSIONS} sessions; 0 would not "
                         r"load so far; the store was not changed \(its copy is removed\); re-run to check "
                         "them all", _summary(err))
    assert found, err
    assert len(out.splitlines()) == 1 + int(found.group(1))  # the heads, a row per session checked
    assert list(Path(env["TMPDIR"]).iterdir()) == []  # no copy left behind
    _intact(url, SESSIONS)


@pytest.mark.parametrize("kind", list(STORES))
def test_gc_interrupted_while_reading_removes_nothing(built: dict[str, tuple[Path, float]], kind: str,
                                                      tmp_path: Path) -> None:
    url = _store(built, kind, tmp_path)
    time.sleep(1.2)  # every session is older than 1 s (a copy counts as stored when copied)
    status, _out, err = interrupt_when(["gc", "--older-than", "1s", "--yes"], _environment(url, tmp_path),
                                       _after(3, "read"))
    assert status == 130, err
    assert re.fullmatch(rf"gc: interrupted after \d+ of {SESSIONS} sessions read; nothing removed; re-run to "
                        "continue", _summary(err)), err
    _intact(url, SESSIONS)


def test_gc_interrupted_while_removing_stops_between_two_sessions(built: dict[str, tuple[Path, float]],
                                                                  tmp_path: Path) -> None:
    """Removals are seen in the store's directory; the summary's count is what is gone, every
    session left reads whole, and running gc again removes the rest."""
    url = _store(built, "jsonl", tmp_path)
    root = tmp_path / "store"
    time.sleep(1.2)  # every session is older than 1 s (a copy counts as stored when copied)

    def left() -> int:  # a session directory each, under the directory of their cwd
        return len(os.listdir(root / "--work-project--"))

    env = _environment(url, tmp_path)
    command = [sys.executable, "-m", "agentlog.cli", "gc", "--older-than", "1s", "--yes"]
    with subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        deadline = time.monotonic() + 120
        while left() == SESSIONS and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
    assert process.returncode == 130, out[-300:]
    found = re.fullmatch(r"gc: interrupted after (\d+) of (\d+) sessions removed \(each removed whole; "
                         r"none was left half-removed\); re-run to continue", _summary(err))
    assert found, err
    removed, planned = int(found.group(1)), int(found.group(2))
    assert 1 <= removed < planned <= SESSIONS and left() == SESSIONS - removed
    assert out.count(" deleted ") == removed and f"store: {url}" in out
    _intact(url, SESSIONS - removed)
    again = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    _intact(url, 0)


def test_tail_follow_stopped_says_how_many_new_events_it_printed(tmp_path: Path) -> None:
    from agentlog import Recorder

    url = f"jsonl://{tmp_path / 'store'}"
    record(url, "live")
    env = _environment(url, tmp_path)
    with subprocess.Popen([sys.executable, "-m", "agentlog.cli", "tail", "live", "-n", "1", "-f"], env=env,
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        assert process.stdout.readline(), process.communicate()  # the last stored event: following now
        with open_store(url) as store:
            before = len(store.read_from("live", 0).events)
            with store.open("live") as live, Recorder(live).turn() as turn:
                turn.user_message("one more")
            new = len(store.read_from("live", 0).events) - before
        printed = [process.stdout.readline() for _ in range(new)]
        assert all(printed), printed
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 130 and out == "", (out, err)
    assert _summary(err) == f"tail -f: stopped after {new} new events (Ctrl-C)"


def test_a_large_file_shows_its_progress_in_bytes_on_stderr_only(tmp_path: Path) -> None:
    """--json stdout stays one JSON line per session; stderr counts the bytes parsed, never
    backwards, then says it is storing the events."""
    import json

    source = big_claude_code_file(tmp_path / "big.jsonl", 24 << 20)
    url = f"jsonl://{tmp_path / 'store'}"
    done = subprocess.run([sys.executable, "-m", "agentlog.cli", "import", "claude-code", str(source),
                           "--json"], env=_environment(url, tmp_path), cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    [row] = [json.loads(line) for line in done.stdout.splitlines()]
    assert row["outcome"] == "imported" and row["session"] == "cc-big"
    lines = re.findall(r"^import: big\.jsonl: ([\d.]+ (?:kB|MB)) of 2\d MB parsed$", done.stderr,
                       re.MULTILINE)
    parsed = [_bytes(found) for found in lines]
    assert len(parsed) >= 10 and parsed == sorted(parsed) and parsed[-1] >= 24e6 * 0.9, done.stderr
    assert re.search(rf"^import: big\.jsonl: storing {row['events']:,} events$", done.stderr, re.MULTILINE)
    assert "Traceback" not in done.stderr
    _intact(url, 1)


def test_a_large_file_interrupted_while_parsing_stores_none_of_it(tmp_path: Path) -> None:
    source = big_claude_code_file(tmp_path / "big.jsonl", 24 << 20)
    url = f"jsonl://{tmp_path / 'store'}"
    status, _out, err = interrupt_when(["import", "claude-code", str(source)], _environment(url, tmp_path),
                                      lambda line: re.search(r"big\.jsonl: [\d.]+ MB of", line) is not None)
    assert status == 130, err
    assert _summary(err) == ("import: interrupted after 0 of 1 files (big.jsonl was being parsed: none of it "
                             "was stored): 0 sessions stored; re-running the same import resumes (sessions "
                             "already stored are skipped)"), err
    assert "stopping after the current file" in err
    if (tmp_path / "store").exists():  # a JSONL store is created with its first session
        _intact(url, 0)


def big_claude_code_file(path: Path, size: int) -> Path:
    """A Claude Code transcript of about ``size`` bytes: user and assistant records, chained."""
    import json

    pad = "x" * 2000
    with open(path, "w") as file:
        parent, number = None, 0
        while file.tell() < size:
            user = {"parentUuid": parent, "isSidechain": False, "cwd": "/home/dev/proj",
                    "sessionId": "cc-big", "type": "user",
                    "message": {"role": "user", "content": f"question {number} {pad}"},
                    "uuid": f"u{number}", "timestamp": "2026-01-05T10:00:01.000Z"}
            reply = {"parentUuid": f"u{number}", "isSidechain": False, "cwd": "/home/dev/proj",
                     "sessionId": "cc-big", "type": "assistant", "uuid": f"a{number}",
                     "timestamp": "2026-01-05T10:00:02.000Z",
                     "message": {"model": "m", "id": f"msg_{number}", "type": "message", "role": "assistant",
                                 "content": [{"type": "text", "text": f"answer {number} {pad}"}],
                                 "usage": {"input_tokens": 10, "output_tokens": 3}}}
            file.write(json.dumps(user) + "\n" + json.dumps(reply) + "\n")
            parent, number = f"a{number}", number + 1
    return path


def _bytes(text: str) -> float:
    number, unit = text.split()
    return float(number) * {"kB": 1e3, "MB": 1e6}[unit]


@pytest.mark.parametrize(("count", "text"), [
    (0, "0 bytes"), (1, "1 byte"), (999, "999 bytes"), (41_000, "41 kB"), (1_234_567, "1.2 MB"),
    (412_000_000, "412 MB"), (1_300_000_000, "1.3 GB")])
def test_sizes_read_as_people_write_them(count: int, text: str) -> None:
    from agentlog.cli.progress import size

    assert size(count) == text


@pytest.mark.parametrize(("value", "seconds"), [(None, 5.0), ("0", 0.0), ("2.5", 2.5), ("-1", 5.0),
                                                ("nan", 5.0), ("inf", 5.0), ("soon", 5.0)])
def test_the_progress_interval_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                          value: str | None, seconds: float) -> None:
    from agentlog.cli.progress import INTERVAL_ENV, interval

    if value is None:
        monkeypatch.delenv(INTERVAL_ENV, raising=False)
    else:
        monkeypatch.setenv(INTERVAL_ENV, value)
    assert interval() == seconds


def _chat(provider: Provider, root: Path, store: Path) -> subprocess.Popen[str]:
    """``agentlog chat`` reading its prompts from a pipe, as a user at a terminal would type them."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI_", "AGENTLOG_"))}
    env.update({"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"})
    return subprocess.Popen([sys.executable, "-m", "agentlog.cli", "--store", f"jsonl://{store}", "chat",
                             "--base-url", provider.base_url, "--api-key", "k", "--model", "gpt-4o",
                             "--root", str(root)], env=env, cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_chat_stopped_between_turns_says_how_to_resume(provider: Provider, root: Path,
                                                       tmp_path: Path) -> None:
    from agentlog import check_invariants
    from agentlog.core.events import TURN_END

    provider.queue(sse("openai_final_text"))
    store = tmp_path / "store"
    with _chat(provider, root, store) as process:
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        sid = process.stderr.readline().split()[1]
        process.stdin.write("What is in a.txt?\n")
        process.stdin.flush()
        assert process.stdout.readline() == "a.txt says hello; the directory has two files.\n"
        _asleep_reading(process.pid)
        process.send_signal(signal.SIGINT)  # waiting for the next prompt
        _out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert _summary(err) == (f"chat: stopped (Ctrl-C); session {sid} holds 1 turn; resume with agentlog chat "
                             f"--resume {sid}")
    with open_store(f"jsonl://{store}", create=False) as opened:
        stored = opened.inspect(sid, trust_checkpoint=False)
    assert stored.recovery is None
    check_invariants(stored.events)
    ends = [event.data["reason"]["kind"] for event in stored.events if event.type == TURN_END]
    assert ends == ["completed"]


def test_chat_stopped_before_a_first_prompt_keeps_no_session(provider: Provider, root: Path,
                                                             tmp_path: Path) -> None:
    store = tmp_path / "store"
    with _chat(provider, root, store) as process:
        assert process.stderr is not None
        sid = process.stderr.readline().split()[1]
        _asleep_reading(process.pid)  # the first prompt
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert _summary(err) == f"chat: stopped (Ctrl-C); no turn was recorded, so session {sid} was not kept"
    if store.exists():
        _intact(f"jsonl://{store}", 0)


_READING = ("wait_woken", "n_tty_read", "pipe_read", "anon_pipe_read", "do_select", "poll_schedule_timeout")
"""Where /proc/PID/wchan says a process sleeps while it waits for input."""


def _asleep_reading(pid: int) -> None:
    """Wait until process ``pid`` sleeps in the kernel waiting for input (its answer)."""
    deadline = time.monotonic() + 30  # past it, signal all the same: the assertions will tell
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/wchan") as wchan:
            if wchan.read() in _READING:
                return
        time.sleep(0.01)


def test_gc_stopped_at_its_question_removes_nothing(built: dict[str, tuple[Path, float]],
                                                    tmp_path: Path) -> None:
    """On a terminal gc asks first; a Ctrl-C at the question is the command's Ctrl-C (130, one
    line), not click's "Aborted!" (status 1)."""
    import pty

    url = _store(built, "jsonl", tmp_path)
    time.sleep(1.2)  # every session is older than 1 s (a copy counts as stored when copied)
    terminal, typing = pty.openpty()
    with subprocess.Popen([sys.executable, "-m", "agentlog.cli", "gc", "--older-than", "1s"],
                          env=_environment(url, tmp_path), cwd=REPO, stdin=typing, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as process:
        assert process.stdout is not None
        shown = b""
        while b"sessions? [y/N]" not in shown and process.poll() is None:
            shown += os.read(process.stdout.fileno(), 65536)
        _asleep_reading(process.pid)  # a signal just before the read would wait for the next one
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=60)
    os.close(terminal)
    os.close(typing)
    assert process.returncode == 130, err
    assert _summary(err.decode()) == "gc: stopped at the question (Ctrl-C); nothing removed"
    _intact(url, SESSIONS)
