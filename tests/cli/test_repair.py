"""``agentlog repair``: shows the crash repair a load would commit, then commits it under the lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from agentlog import open_store
from tests.cli.conftest import REPO, crash, invoke, record, run


def test_dry_run_shows_the_repair_and_writes_nothing(store_url: str) -> None:
    crash(store_url, "c")
    before = invoke(store_url, "inspect", "c", "--json").stdout
    dry = invoke(store_url, "repair", "c", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    shape = json.loads(dry.stdout)
    assert shape["dryRun"] is True and shape["repaired"] is False
    assert shape["recovery"]["interruptedTurn"] == 1
    assert [event["type"] for event in shape["recovery"]["closers"]] == ["turn/end"]
    assert invoke(store_url, "inspect", "c", "--json").stdout == before
    assert invoke(store_url, "verify", "c").exit_code == 2  # still needs the repair


def test_repair_commits_and_then_verify_is_clean(store_url: str) -> None:
    crash(store_url, "c")
    done = run(store_url, "repair", "c")
    assert done.returncode == 0, done.stderr
    assert "repaired" in done.stdout and "interrupted turn 1" in done.stdout
    assert run(store_url, "verify", "c").returncode == 0
    again = invoke(store_url, "repair", "c", "--json")
    assert json.loads(again.stdout) == {"id": "c", "dryRun": False, "repaired": False, "recovery": None,
                                         "tornCopy": None}
    with open_store(store_url) as store:
        events = store.read_from("c", 0).events
    assert events[-1].type == "turn/end" and events[-1].data["reason"]["kind"] == "interrupted"


def test_repair_of_an_intact_session_says_so(store_url: str) -> None:
    record(store_url, "fine")
    result = invoke(store_url, "repair", "fine")
    assert result.exit_code == 0 and "nothing to repair" in result.stdout


HOLD = """
import sys
from agentlog import Recorder, open_store
with open_store(sys.argv[1]) as store, store.open(sys.argv[2]) as live:
    turn = Recorder(live).turn().__enter__()
    turn.user_message("still working")
    live.flush()
    print("HELD", flush=True)
    sys.stdin.readline()
"""


def test_repair_is_refused_while_another_process_writes_the_session(store_url: str) -> None:
    record(store_url, "busy")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, store_url, "busy"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "HELD"
        before = invoke(store_url, "inspect", "busy", "--json").stdout
        refused = run(store_url, "repair", "busy")
        assert refused.returncode == 1
        assert refused.stdout == ""  # nothing claimed
        assert "open for writing by process" in refused.stderr and "Traceback" not in refused.stderr
        assert invoke(store_url, "inspect", "busy", "--json").stdout == before  # nothing written
    finally:
        holder.communicate("\n", timeout=60)


def test_repair_truncates_a_torn_tail_and_names_its_bytes(tmp_path: object) -> None:
    url = f"jsonl://{tmp_path}/store?compression=none"
    record(url, "torn")
    with open_store(url) as store:
        path = store.locate(store.read_from("torn", 0).header)
    assert path is not None
    intact = os.path.getsize(path)
    with open(path, "ab") as transcript:
        transcript.write(b'{"type": "user/mess')  # a write cut short by a crash
    dry = invoke(url, "repair", "torn", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert f"torn tail: 19 bytes ignored after byte {intact}" in dry.stdout
    assert os.path.getsize(path) == intact + 19
    done = run(url, "repair", "torn", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["recovery"]["tornBytes"] == 19
    assert os.path.getsize(path) == intact
    assert invoke(url, "verify", "torn").exit_code == 0
