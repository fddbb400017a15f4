"""``agentlog repair --salvage``: damage in the middle stays a refusal, and what can still be read
goes into a new session with an exact account of what was lost (issue 25 item 3).

Real transcripts damaged with plain file writes; the command runs in a subprocess; the original
file is compared byte for byte afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path

import zstandard

from agentlog import open_store
from agentlog.store.jsonl.zstd_frames import scan_zstd_frames
from tests.cli.conftest import invoke, record, run
from tests.cli.test_torn_tails import recorded, url_of


def seqs_of(url: str, session_id: str) -> list[tuple[int, str]]:
    with open_store(url) as store:
        return [(event.seq, event.type) for event in store.inspect(session_id).events]


def test_a_damaged_zstd_frame_in_the_middle_is_salvaged_up_to_the_gap(tmp_path: Path) -> None:
    url, path = recorded(tmp_path, "zstd", 4)
    original = seqs_of(url, "s")
    data = bytearray(path.read_bytes())
    frames = scan_zstd_frames(bytes(data)).frames
    start, end = frames[2]
    kept = _first_seq_of_frame(bytes(data), 2)  # the events before the damaged frame
    dropped_from = _first_seq_of_frame(bytes(data), 3)
    data[start:end] = b"\0" * (end - start)
    damaged = bytes(data)
    path.write_bytes(damaged)
    assert run(url, "verify", "s").returncode == 1
    assert run(url, "repair", "s").returncode == 1

    dry = json.loads(run(url, "repair", "s", "--salvage", "--dry-run", "--json").stdout)
    assert dry["written"] is False and dry["events"] == kept
    with open_store(url) as store:  # nothing was created
        assert [header.id for header in store.list()] == ["s"]

    done = run(url, "repair", "s", "--salvage", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    shape = json.loads(done.stdout)
    assert shape["into"] == "s-salvaged" and shape["written"] is True
    assert shape["lost"] == [{"offset": start, "bytes": end - start, "what": "damaged frame"}]
    assert shape["missingFrom"] == kept
    assert shape["dropped"] == [{"offset": end, "firstSeq": dropped_from, "lastSeq": original[-1][0]}]
    assert path.read_bytes() == damaged, "the original is only read"
    salvaged = seqs_of(url, "s-salvaged")
    assert salvaged[:kept] == original[:kept]
    assert len(salvaged) == kept + shape["closers"]
    assert run(url, "verify", "s-salvaged").returncode == 0

    human = run(url, "repair", "s", "--salvage", "--into", "s2")
    assert human.returncode == 0, human.stderr
    assert f"salvaged {kept} events (seq 0..{kept - 1}) into s2" in human.stdout
    assert f"lost: {end - start} bytes at byte {start} (damaged frame)" in human.stdout
    assert f"(readable, but seq {kept} is missing before it)" in human.stdout


def _first_seq_of_frame(data: bytes, index: int) -> int:
    start, end = scan_zstd_frames(data).frames[index]
    line = zstandard.ZstdDecompressor().decompressobj().decompress(data[start:end]).split(b"\n", 1)[0]
    value = json.loads(line)
    return int(value["seq0"] if "seq0" in value else value["seq"])


def test_a_garbage_line_in_a_raw_transcript_held_no_event_so_everything_is_salvaged(tmp_path: Path) -> None:
    url, path = recorded(tmp_path, "none", 3)
    original = seqs_of(url, "s")
    lines = path.read_bytes().split(b"\n")
    at = sum(len(line) + 1 for line in lines[:4])
    damaged = b"\n".join(lines[:4]) + b"\n" + b"#garbage\n" + b"\n".join(lines[4:])
    path.write_bytes(damaged)
    assert run(url, "verify", "s").returncode == 1  # a later turn/end makes it damage, not a torn tail
    done = json.loads(run(url, "repair", "s", "--salvage", "--json").stdout)
    assert done["lost"] == [{"offset": at, "bytes": 9, "what": "unreadable line"}]
    assert done["dropped"] == [] and done["missingFrom"] is None and done["closers"] == 0
    assert seqs_of(url, "s-salvaged") == original
    assert path.read_bytes() == damaged


def test_a_damaged_raw_line_drops_what_follows_it(tmp_path: Path) -> None:
    url, path = recorded(tmp_path, "none", 3)
    data = path.read_bytes()
    lines = data.split(b"\n")
    lost_seq = json.loads(lines[5]).get("seq", json.loads(lines[5]).get("seq0"))
    offset = sum(len(line) + 1 for line in lines[:5])
    lines[5] = lines[5][:10] + b"\x00" + lines[5][11:]
    path.write_bytes(b"\n".join(lines))
    done = json.loads(run(url, "repair", "s", "--salvage", "--json").stdout)
    assert done["lost"] == [{"offset": offset, "bytes": len(lines[5]) + 1, "what": "unreadable line"}]
    assert done["missingFrom"] == lost_seq == done["events"]
    assert done["dropped"] and done["dropped"][0]["offset"] == offset + len(lines[5]) + 1
    assert run(url, "verify", "s-salvaged").returncode == 0


def test_salvage_refuses_an_existing_target_and_other_backends(tmp_path: Path) -> None:
    root = tmp_path / "store"
    url = url_of(root, "zstd")
    record(url, "s")
    record(url, "taken")
    taken = run(url, "repair", "s", "--salvage", "--into", "taken")
    assert taken.returncode == 1 and "taken" in taken.stderr and "Traceback" not in taken.stderr
    clean = run(url, "repair", "s", "--salvage")
    assert clean.returncode == 0 and "nothing was lost" in clean.stdout
    sqlite = f"sqlite://{tmp_path}/sessions.db"
    record(sqlite, "s")
    refused = invoke(sqlite, "repair", "s", "--salvage")
    assert refused.exit_code != 0 and "JSONL transcripts" in refused.output
    assert invoke(url, "repair", "s", "--into", "x").exit_code == 2
