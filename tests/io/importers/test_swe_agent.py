"""SWE-agent and mini-swe-agent trajectories: one turn, every action a call answered by its observation."""

from __future__ import annotations

import pytest

from tests.conftest import shared_data_dir
from tests.io.importers.corpus import real_files
from tests.io.importers.helpers import FIXTURES, assert_golden, checked, import_file

REAL = [("swe-agent", path) for path in real_files("swe-agent")] + [
    ("mini-swe-agent", path) for path in real_files("mini-swe-agent")]


def test_the_real_corpus_is_covered() -> None:
    shared_data_dir()
    assert len(REAL) == 9


@pytest.mark.parametrize(("fmt", "relative"), REAL)
def test_every_real_trajectory_imports_as_one_turn(fmt: str, relative: str) -> None:
    path = shared_data_dir() / relative
    (imported,) = import_file(fmt, path)
    session = checked(imported)
    types = [event.type for event in imported.events]
    assert types.count("turn/start") == 1
    calls, results = types.count("tool/call"), types.count("tool/result")
    assert calls == types.count("assistant/message")  # every reply acted
    if fmt == "swe-agent":
        assert calls == results  # the submitting action too: its observation is in "trajectory"
    else:
        assert calls - results <= 1  # the submitting call is answered by the "exit" message
    assert ImportedOrigin(imported).format == fmt
    assert session.request_header() is not None and session.request_header()["system"]


class ImportedOrigin:
    def __init__(self, imported: object) -> None:
        self.format = imported.header.extra["importedFrom"]["format"]  # type: ignore[attr-defined]


def test_golden_small_swe_agent_text_actions() -> None:
    sessions = import_file("swe-agent", FIXTURES / "swe-agent" / "small.traj")
    (imported,) = sessions
    checked(imported)
    calls = [e.data for e in imported.events if e.type == "tool/call"]
    assert [c["arguments"] for c in calls] == ['{"action":"open missing_colon.py\\n"}',
                                              '{"action":"submit\\n"}']
    assert imported.header.extra["importedFrom"]["info"]["exit_status"] == "submitted"
    assert_golden(sessions, "swe-agent-small")


def test_golden_small_mini_swe_agent_tool_calls() -> None:
    sessions = import_file("mini-swe-agent", FIXTURES / "mini-swe-agent" / "small.traj.json")
    (imported,) = sessions
    checked(imported)
    result = next(e.data for e in imported.events if e.type == "tool/result")
    assert result["message"]["content"][0]["isError"] is True and result["meta"]["returncode"] == 2
    message = next(e.data for e in imported.events if e.type == "assistant/message")
    assert message["usage"] == {"inputTokens": 40, "outputTokens": 10, "cacheReadTokens": 60}
    assert imported.header.created_at == 1780680347500
    assert_golden(sessions, "mini-swe-agent-small")


def test_the_final_submit_keeps_its_observation() -> None:
    # SWE-agent writes the observation of the action that ends the run only into "trajectory":
    # the CTF demonstration's 14 actions must give 14 results, the last one the flag submit printed
    path = shared_data_dir() / "transcripts-more/swe-agent/SWE-agent__SWE-agent/trajectories"
    path = path / "demonstrations" / "ctf" / "crypto" / "eps.traj"
    (imported,) = import_file("swe-agent", path)
    checked(imported)
    types = [event.type for event in imported.events]
    assert types.count("tool/call") == types.count("tool/result") == 14
    last = [event.data for event in imported.events if event.type == "tool/result"][-1]
    (block,) = last["message"]["content"]
    flag = "\nflag{People always make the best exploits.}\n"
    assert list(block["content"]) == [{"type": "text", "text": flag}]
    assert last["message"]["source"]["callId"] == [e.data for e in imported.events
                                                   if e.type == "tool/call"][-1]["callId"]
