"""``agentlog verify`` tells the truth about damage, and ``inspect`` prints values of any depth.

Real files, a real SQLite database and real PostgreSQL; every number the command prints is
checked against what the test computes from the bytes it wrote (issue 11, items 7 and 10).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner

from agentlog import Event, SessionHeader
from agentlog.cli.main import cli
from agentlog.core.repair import interrupted_turn_closers
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.urls import open_store
from tests.contract.logs import LogBuilder
from tests.store.pg_worker import Schema

REPO = Path(__file__).resolve().parents[2]
HEADER = SessionHeader(id="s1", created_at=1000, cwd="/home/user/project")


def run(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The command line as a user runs it: a real process."""
    env = {**os.environ, "AGENTLOG_STORE": url, "COLUMNS": "200", "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "agentlog.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def verify_in_process(url: str) -> tuple[int, str]:
    """``verify s1`` through click's runner (same code, no interpreter start: for offset sweeps)."""
    result = CliRunner().invoke(cli, ["--store", url, "verify", "s1"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def make_log(turns: int, *, close_last: bool = True) -> LogBuilder:
    log = LogBuilder()
    for turn in range(1, turns + 1):
        log.turn(turn, close=close_last or turn < turns)
    return log


def write_batches(store: JsonlStore, log: LogBuilder, size: int = 9) -> list[int]:
    """Append ``log`` in batches of ``size``; return the file size after each (batch boundaries)."""
    store.create(HEADER)
    path = Path(str(store.locate(HEADER)))
    sizes = []
    for start in range(0, len(log.events), size):
        store.append("s1", log.events[start:start + size])
        sizes.append(path.stat().st_size)
    return sizes


def raw_events(prefix: bytes) -> int:
    """Events held by the complete lines of a raw transcript prefix (a packed chunk line holds a run)."""
    lines = [json.loads(line) for line in prefix.split(b"\n")[1:] if line]
    return sum(len(line["data"]["texts"]) if "seq0" in line else 1 for line in lines)


def jsonl_url(root: Path, compression: str) -> str:
    return f"jsonl://{root}?compression={compression}"


def closers_for(log: LogBuilder, intact: int) -> list[Event]:
    return interrupted_turn_closers([Event.from_wire(event) for event in log.events[:intact]])


def printed_closers(output: str) -> list[tuple[int, str]]:
    return [(int(seq), kind) for seq, kind in re.findall(r"^    seq (\d+) (\S+)", output, re.MULTILINE)]


def intact_count(output: str) -> int:
    found = re.search(r"^  intact: (\d+) events", output, re.MULTILINE)
    assert found, output
    return int(found.group(1))


def torn_bytes(output: str) -> tuple[int, int] | None:
    found = re.search(r"torn tail: (\d+) bytes? ignored after byte (\d+)", output)
    return None if found is None else (int(found.group(1)), int(found.group(2)))


# -- intact, and the statuses in --help --------------------------------------------------------------


@pytest.fixture(params=["jsonl-none", "jsonl-zstd", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    kind = str(request.param)
    if kind == "postgres":
        schema = Schema.new()
        yield schema.url
        schema.drop()
    elif kind == "sqlite":
        yield f"sqlite://{tmp_path / 'sessions.db'}"
    else:
        yield jsonl_url(tmp_path / "root", kind.removeprefix("jsonl-"))


def store_log(url: str, log: LogBuilder) -> None:
    with open_store(url) as store:
        store.create(HEADER)
        store.append("s1", log.events)


def test_an_intact_session_is_ok_with_exit_status_0(url: str) -> None:
    log = make_log(2)
    store_log(url, log)
    result = run(url, "verify", "s1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"ok s1: {len(log.events)} events")


def test_an_interrupted_turn_is_recovered_with_exit_status_2_naming_the_closers(url: str) -> None:
    log = make_log(2, close_last=False)
    log.add("step/start", {"turn": 2, "step": 2})
    log.assistant(2, 2, "reading", calls=("c9",))
    log.tool_call(2, 2, "c9")
    store_log(url, log)
    expected = closers_for(log, len(log.events))
    result = run(url, "verify", "s1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout.startswith("recovered s1:")
    assert intact_count(result.stdout) == len(log.events)
    assert torn_bytes(result.stdout) is None and "torn tail" not in result.stdout
    assert f"interrupted turn 2 would be closed by {len(expected)} synthetic events" in result.stdout
    assert printed_closers(result.stdout) == [(event.seq, event.type) for event in expected]
    assert "tool/result" in [event.type for event in expected]
    again = run(url, "verify", "s1")  # verify never writes: the same report again
    assert (again.returncode, again.stdout) == (2, result.stdout)


def test_missing_session_exits_1_and_usage_errors_exit_64_as_help_says(tmp_path: Path) -> None:
    url = jsonl_url(tmp_path / "root", "zstd")
    absent_store = run(url, "verify", "nope")
    assert absent_store.returncode == 1 and "no store at" in absent_store.stderr
    (tmp_path / "root").mkdir()
    missing = run(url, "verify", "nope")
    assert missing.returncode == 1 and "not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    no_id = run(url, "verify")
    assert no_id.returncode == 64 and "Missing argument 'SESSION_ID'" in no_id.stderr
    bad_option = run(url, "verify", "s1", "--bogus")
    assert bad_option.returncode == 64 and "No such option '--bogus'" in bad_option.stderr
    shown = run(url, "verify", "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    for status in ("0 intact", "1 invalid", "2 readable but recovered", "64 usage error"):
        assert status in text


# -- torn tails in files ---------------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_file_cut_in_half_reports_the_bytes_ignored_and_the_closers(
    tmp_path: Path, compression: str,
) -> None:
    root = tmp_path / "root"
    log = make_log(4)
    sizes = write_batches(JsonlStore(root, compression=compression), log)  # type: ignore[arg-type]
    path = Path(str(JsonlStore(root, compression=compression).locate(HEADER)))  # type: ignore[arg-type]
    full = path.read_bytes()
    cut = len(full) // 2
    path.write_bytes(full[:cut])
    if compression == "none":  # complete lines survive; the partial one is the torn tail
        valid_end = full.rfind(b"\n", 0, cut) + 1
        intact = raw_events(full[:valid_end])
    else:  # complete frames survive; the cut frame is the torn tail (one frame per batch)
        valid_end = max(size for size in sizes if size <= cut)
        intact = 9 * (sizes.index(valid_end) + 1)
    expected = closers_for(log, intact)
    result = run(jsonl_url(root, compression), "verify", "s1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert intact < len(log.events) // 2 + 9
    assert intact_count(result.stdout) == intact
    assert torn_bytes(result.stdout) == (cut - valid_end, valid_end)
    assert str(path) in result.stdout
    assert printed_closers(result.stdout) == [(event.seq, event.type) for event in expected]
    assert path.read_bytes() == full[:cut], "verify must not write"


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_every_few_bytes_of_the_last_batch_cut_reports_exactly_what_load_repairs(
    tmp_path: Path, compression: str,
) -> None:
    root, log = tmp_path / "root", make_log(3)
    store = JsonlStore(root, compression=compression)  # type: ignore[arg-type]
    *_, before, end = write_batches(store, log)
    path = Path(str(store.locate(HEADER)))
    full = path.read_bytes()
    sidecar = path.with_name(path.name + ".seek")
    digests = sidecar.read_bytes()  # the crash state: the sidecar as the writer left it, too
    assert len(full) == end
    last_frame = zstandard.ZstdDecompressor().decompressobj()
    salvaging_cuts = 0
    for cut in [*range(before, len(full), 5), len(full) - 1]:
        path.write_bytes(full[:cut])
        sidecar.write_bytes(digests)
        if compression == "none":
            valid_end = full.rfind(b"\n", 0, cut) + 1
            intact, salvaged = raw_events(full[:valid_end]), 0
        else:
            valid_end, intact = before, 18
            try:
                partial = last_frame.decompress(full[before:cut]) if cut > before else b""
            except zstandard.ZstdError:
                partial = b""
            last_frame = zstandard.ZstdDecompressor().decompressobj()
            salvaged = raw_events(b"\n" + partial[:partial.rfind(b"\n") + 1])
        expected = closers_for(log, intact + salvaged)
        status, output = verify_in_process(jsonl_url(root, compression))
        if cut == valid_end and not expected:
            assert status == 0 and output.startswith("ok"), f"cut at {cut}: {output}"
            continue
        assert status == 2, f"cut at {cut}: {output}"
        assert intact_count(output) == intact, f"cut at {cut}"
        assert torn_bytes(output) == ((cut - valid_end, valid_end) if cut > valid_end else None), f"cut {cut}"
        if salvaged:
            salvaging_cuts += 1
            assert f"recovered from the torn tail: {salvaged} complete events" in output
        assert printed_closers(output) == [(event.seq, event.type) for event in expected], f"cut at {cut}"
        loaded = JsonlStore(root, compression=compression).load("s1")  # type: ignore[arg-type]
        assert [(event.seq, event.type) for event in loaded.events[intact + salvaged:]] == [
            (event.seq, event.type) for event in expected
        ], f"cut at {cut}: verify and load disagree"
    assert salvaging_cuts > 0 or compression == "none"  # a cut inside the checksum keeps every record


def test_a_flipped_byte_in_a_committed_zstd_frame_is_invalid(tmp_path: Path) -> None:
    root = tmp_path / "root"
    sizes = write_batches(JsonlStore(root), make_log(3))
    path = Path(str(JsonlStore(root).locate(HEADER)))
    data = bytearray(path.read_bytes())
    data[sizes[0] - 10] ^= 0x01
    path.write_bytes(bytes(data))
    result = run(jsonl_url(root, "zstd"), "verify", "s1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "corrupt" in result.stderr and str(path) in result.stderr
    assert "Traceback" not in result.stderr


def test_raw_jsonl_a_flipped_letter_inside_a_string_is_found_by_its_digest(tmp_path: Path) -> None:
    """A raw line that still parses is no longer kept silently: the seek sidecar's digests name it."""
    root = tmp_path / "root"
    write_batches(JsonlStore(root, compression="none"), make_log(2))
    path = Path(str(JsonlStore(root, compression="none").locate(HEADER)))
    data = path.read_bytes()
    assert b"question 1" in data
    at = data.index(b"question 1")
    path.write_bytes(data.replace(b"question 1", b"question 7"))
    result = run(jsonl_url(root, "none"), "verify", "s1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "differ from what was written" in result.stderr and str(path) in result.stderr
    start = int(result.stderr.split("bytes ")[1].split("..")[0])
    end = int(result.stderr.split("..")[1].split(" ")[0])
    assert start <= at <= end


def test_a_recorder_killed_mid_turn_is_reported_as_recovered(tmp_path: Path) -> None:
    root = tmp_path / "root"
    script = (
        "import sys, time\n"
        "from agentlog.store.urls import open_store\n"
        "live = open_store(sys.argv[1]).start('s1')\n"
        "live.session.append('turn/start', {'turn': 1})\n"
        "live.session.append('step/start', {'turn': 1, 'step': 1})\n"
        "live.flush()\n"
        "print('READY', flush=True)\n"
        "time.sleep(60)\n"
    )
    url = jsonl_url(root, "zstd")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    with subprocess.Popen([sys.executable, "-c", script, url], stdout=subprocess.PIPE, env=env) as child:
        assert child.stdout is not None and child.stdout.readline() == b"READY\n"
        child.send_signal(signal.SIGKILL)
        child.wait()
    result = run(url, "verify", "s1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert intact_count(result.stdout) == 2
    assert printed_closers(result.stdout) == [(2, "step/end"), (3, "turn/end")]


# -- torn tails in databases ------------------------------------------------------------------------


def test_a_torn_sqlite_tail_names_the_first_ignored_seq(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    url = f"sqlite://{db}"
    log = make_log(2, close_last=False)
    store_log(url, log)
    torn_seq = next(event["seq"] for event in log.events[9:] if event["type"] == "user/message")
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM events WHERE seq = ?", (torn_seq,))
    conn.close()
    expected = closers_for(log, torn_seq)
    result = run(url, "verify", "s1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert intact_count(result.stdout) == torn_seq
    assert f"torn tail: the stored rows from seq {torn_seq} on are ignored" in result.stdout
    assert printed_closers(result.stdout) == [(event.seq, event.type) for event in expected]


def test_a_torn_postgres_tail_names_the_first_ignored_seq() -> None:
    schema = Schema.new()
    try:
        log = make_log(2, close_last=False)
        store_log(schema.url, log)
        torn_seq = next(event["seq"] for event in log.events[9:] if event["type"] == "user/message")
        schema.sql("UPDATE {s}.events SET data = '{\"turn\":' WHERE session_id = 's1' AND seq = %s",
                   (torn_seq,))
        expected = closers_for(log, torn_seq)
        result = run(schema.url, "verify", "s1")
        assert result.returncode == 2, result.stdout + result.stderr
        assert intact_count(result.stdout) == torn_seq
        assert f"torn tail: the stored rows from seq {torn_seq} on are ignored" in result.stdout
        assert printed_closers(result.stdout) == [(event.seq, event.type) for event in expected]
    finally:
        schema.drop()


# -- inspect prints values of any depth ----------------------------------------------------------------


def test_inspect_prints_a_100k_deep_value(tmp_path: Path) -> None:
    url = jsonl_url(tmp_path / "root", "zstd")
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with open_store(url) as store, store.start("deep") as live:
        live.session.append("turn/start", {"turn": 1})
        live.session.append("step/start", {"turn": 1, "step": 1})
        live.session.append("hook/invoked", {"value": deep})
        live.session.append("tool/call", {"turn": 1, "step": 1, "callId": "c", "name": "f",
                                          "arguments": {"x": deep}})
        question = {"id": "u", "role": "user", "source": {"kind": "user"},
                    "content": [{"type": "text", "text": "go"}]}
        live.session.append("user/message", question, surface_op="append")
        message = {"id": "a", "role": "assistant", "source": {"kind": "model", "provider": "p", "model": "m"},
                   "content": [{"type": "tool-call", "id": "c", "name": "f", "arguments": {"x": deep}}]}
        live.session.append("assistant/message", {"turn": 1, "step": 1, "message": message},
                            source_event_seqs=[], surface_op="append")
    inspected = run(url, "inspect", "deep")
    assert inspected.returncode == 0, inspected.stderr[-2000:]
    assert '{"value":[[[[' in inspected.stdout and 'f {"x":[[[[' in inspected.stdout
    assert "→ f({\"x\":[[[[" in inspected.stdout
    shown = run(url, "show", "deep")
    assert shown.returncode == 0 and "→ f({\"x\":[[[[" in shown.stdout, shown.stderr[-2000:]
    as_json = run(url, "show", "deep", "--json")
    assert as_json.returncode == 0, as_json.stderr[-2000:]
    assert as_json.stdout.startswith("[") and '"arguments":{"x":[[[[' in as_json.stdout
    assert run(url, "inspect", "deep", "--json").returncode == 0
    assert run(url, "verify", "deep").returncode == 2  # the turn is open: it would be closed
