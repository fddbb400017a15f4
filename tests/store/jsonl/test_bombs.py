"""A zstd transcript that expands to gigabytes is refused with bounded memory (issue 25, section 5).

The bomb is real: a 64 KB file whose second frame decodes to 2 GiB of zero bytes (one endless
line), read by a child process that reports its own peak RSS (``VmHWM``: ``ru_maxrss`` would count the
parent's size when the child was forked from a large test process). Records up to the
cap still load (50 MB lines: tests/store/test_large_lines.py); a longer one is refused on write.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from agentlog import SessionHeader
from agentlog.errors import InvalidEventError
from agentlog.store.jsonl.format import (
    compress_frame,
    encode_header_line,
    encode_session_id,
    project_key,
    scan_log,
)
from agentlog.store.jsonl.store import JsonlStore
from agentlog.store.jsonl.zstd_frames import MAX_RECORD_BYTES, decode_torn_frame

REPO = Path(__file__).resolve().parents[3]
HEADER = SessionHeader(id="bomb", created_at=1000, cwd="/work/project")
PEAK_RSS_MB = 200


def expanding_frame(unit: bytes, gibibytes: int = 2) -> bytes:
    """One checksummed frame whose plaintext is ``unit`` repeated to ``gibibytes`` GiB."""
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True).compressobj()
    piece = unit * ((16 << 20) // len(unit))
    out = [compressor.compress(piece) for _ in range((gibibytes << 30) // len(piece))]
    return b"".join(out) + compressor.flush()


def plant(root: Path, body: bytes) -> Path:
    """A transcript where the store looks for session ``bomb``: a good header frame, then ``body``."""
    path = root / project_key(HEADER.cwd) / encode_session_id(HEADER.id) / "session.jsonl.zstd"
    path.parent.mkdir(parents=True)
    path.write_bytes(compress_frame(encode_header_line(HEADER)) + body)
    return path


READS = ("inspect", "load", "read_from")

CHILD = """
import json, sys
from agentlog.errors import AgentlogError
from agentlog.store.jsonl.store import JsonlStore
store = JsonlStore(sys.argv[1], create=False)
reads = {"inspect": lambda: store.inspect("bomb"), "load": lambda: store.load("bomb"),
         "read_from": lambda: store.read_from("bomb", 0), "read_raw": lambda: store.read_raw("bomb"),
         "listing": lambda: "; ".join(str(bad.error) for bad in store.listing().unreadable)}
errors = {}
for name in sys.argv[2:]:
    try:
        errors[name] = str(reads[name]())
    except AgentlogError as exc:
        errors[name] = "error: " + str(exc)
with open("/proc/self/status") as status:  # this process's own peak, not one inherited over exec
    peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({"errors": errors, "peak_mb": peak_kb / 1024}))
"""


def read_in_a_child(root: Path, reads: tuple[str, ...] = (*READS, "read_raw", "listing")
                    ) -> dict[str, object]:
    """What each read raised in a fresh process, and that process's peak RSS."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-c", CHILD, str(root), *reads], capture_output=True, text=True,
                          env=env, timeout=240)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def zero_bomb() -> bytes:
    frame = expanding_frame(b"\0")
    assert len(frame) < 100_000
    return frame


def test_a_frame_expanding_to_2_gib_is_refused_naming_file_and_offset_in_bounded_memory(
    tmp_path: Path, zero_bomb: bytes,
) -> None:
    path = plant(tmp_path, zero_bomb)
    offset = len(compress_frame(encode_header_line(HEADER)))
    report = read_in_a_child(tmp_path)
    errors = report["errors"]
    assert isinstance(errors, dict)
    for name in ("inspect", "load", "read_from", "read_raw"):
        assert errors[name].startswith("error: "), (name, errors[name])
        assert f"more than {MAX_RECORD_BYTES} bytes" in errors[name] and str(path) in errors[name], name
        assert f"at byte {offset}" in errors[name], name
    assert path.stat().st_size == offset + len(zero_bomb), "nothing was repaired or written"
    peak = report["peak_mb"]
    print(f"peak RSS {peak:.0f} MB")
    assert isinstance(peak, float) and peak <= PEAK_RSS_MB, f"peak RSS {peak:.0f} MB"


def test_a_header_frame_expanding_to_2_gib_is_refused_in_bounded_memory(
    tmp_path: Path, zero_bomb: bytes,
) -> None:
    path = tmp_path / project_key(HEADER.cwd) / encode_session_id(HEADER.id) / "session.jsonl.zstd"
    path.parent.mkdir(parents=True)
    path.write_bytes(zero_bomb)
    report = read_in_a_child(tmp_path)
    errors = report["errors"]
    assert isinstance(errors, dict)
    assert f"more than {MAX_RECORD_BYTES} bytes" in errors["listing"] and str(path) in errors["listing"]
    assert errors["inspect"].startswith("error: ")
    peak = report["peak_mb"]
    print(f"peak RSS {peak:.0f} MB")
    assert isinstance(peak, float) and peak <= PEAK_RSS_MB, f"peak RSS {peak:.0f} MB"


def test_a_torn_frame_expanding_past_the_cap_recovers_nothing_and_is_cut_whole(zero_bomb: bytes) -> None:
    assert decode_torn_frame(zero_bomb[:-200]) == b""
    head = compress_frame(encode_header_line(HEADER))
    scan = scan_log(head + zero_bomb[:-200], compressed=True, path="/logs/bomb.jsonl.zstd")
    assert scan.torn is not None and scan.torn.recovered == [] and scan.torn.truncate_to == len(head)


def test_many_short_garbage_lines_are_refused_quickly_in_bounded_memory(tmp_path: Path) -> None:
    """2 GiB of one-byte lines: the first defect decides; the rest is only searched for a turn/end."""
    path = plant(tmp_path, expanding_frame(b"x\n"))
    report = read_in_a_child(tmp_path, READS)
    errors = report["errors"]
    assert isinstance(errors, dict)
    for name in READS:
        assert "torn JSONL record (unparsable committed event at line 2)" in errors[name], errors[name]
        assert str(path) in errors[name]
    peak = report["peak_mb"]
    print(f"peak RSS {peak:.0f} MB")
    assert isinstance(peak, float) and peak <= PEAK_RSS_MB, f"peak RSS {peak:.0f} MB"


def test_a_record_over_the_cap_is_refused_on_write_and_the_log_is_unchanged(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    live = store.start(HEADER)
    live.session.append("user/message", {"id": "m", "role": "user", "source": {"kind": "user"},
                                         "content": [{"type": "text", "text": "hi"}]}, surface_op="append")
    live.flush()
    live.close()
    path = Path(store.locate(HEADER))
    before = path.read_bytes()
    huge = {"type": "user/message", "seq": 1, "time": 1, "data": {
        "id": "h", "role": "user", "source": {"kind": "user"},
        "content": [{"type": "text", "text": "a" * (MAX_RECORD_BYTES + 1)}]}, "surfaceOp": "append"}
    with pytest.raises(InvalidEventError, match="cap of a zstd transcript"):
        store.append("bomb", [huge])
    assert path.read_bytes() == before
