"""Hand-written sessions for the export and audit tests: deterministic, every block kind once."""

from __future__ import annotations

from typing import Any

from agentlog import Replace, Session, SessionHeader
from tests.strategies import assistant_data, fixed_clock, tool_result_data, user_message

TOOLS = [{"name": "run", "description": "Run a shell command.",
          "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]
ROUTE = {"kind": "model", "provider": "deepseek", "model": "deepseek-reasoner"}
HEADER = {"config": {"provider": "deepseek", "model": "deepseek-reasoner"},
          "system": "You are a careful coding agent.", "tools": TOOLS}


def assistant(msg_id: str, content: list[Any], *, turn: int = 1, step: int = 1,
              source: Any = None) -> dict[str, Any]:
    """An ``assistant/message`` payload with the given blocks."""
    data = assistant_data(msg_id, None, turn=turn, step=step)
    data["message"]["content"] = content
    data["message"]["source"] = source or ROUTE
    return data


def sample_session(session_id: str = "sample", *, text: str = "", compact: bool = True) -> Session:
    """Two turns: reasoning, a tool call with an error result, an answer; then a compaction.

    ``text`` is added to every string the session's messages carry (hostile content, secrets).
    """
    header = SessionHeader(id=session_id, created_at=1_764_547_200_000, cwd="/work/project")
    session = Session.create(session_id, header=header, clock=fixed_clock(1_764_547_200_000))
    append = session.append
    append("turn/start", {"turn": 1})
    append("step/start", {"turn": 1, "step": 1})
    first = append("user/message", user_message("u1", f"Why does the test fail?{text}"), surface_op="append")
    append("request/header", {"header": HEADER, "reason": "initial"})
    append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0,
                                                                "text": f"Let me run it.{text}"}})
    call = {"type": "tool-call", "id": "call-1", "name": "run", "arguments": f'{{"cmd": "pytest -q{text}"}}'}
    signed = {**ROUTE, "replayState": {"anthropic": {"signatures": ["c2lnbmF0dXJl"]}}}
    blocks = [{"type": "reasoning", "text": f"Run the tests first.{text}"},
              {"type": "text", "text": f"Let me run it.{text}"}, call]
    append("assistant/message", assistant("a1", blocks, source=signed), surface_op="append",
           source_event_seqs=[4])
    append("tool/call", {"turn": 1, "step": 1, "callId": "call-1", "name": "run",
                         "arguments": call["arguments"]})
    append("tool/result", tool_result_data("call-1", f"1 failed: assert 2 == 2.5{text}", is_error=True),
           surface_op="append")
    append("step/end", {"turn": 1, "step": 1})
    append("step/start", {"turn": 1, "step": 2})
    reply = assistant("a2", [{"type": "text", "text": f"divide uses `//`.{text}"}], step=2)
    answer = append("assistant/message", reply, surface_op="append", source_event_seqs=[])
    append("step/end", {"turn": 1, "step": 2})
    append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    if compact:
        append("user/message", user_message("c1", f"Summary: the test fails on floor division.{text}",
                                            {"kind": "plugin", "plugin": "compact"}),
               surface_op=Replace(first.seq, answer.seq),
               source_event_seqs=[e.seq for e in session.events if e.surface_op == "append"])
    append("turn/start", {"turn": 2})
    append("step/start", {"turn": 2, "step": 1})
    append("user/message", user_message("u2", f"Fix it.{text}"), surface_op="append")
    append("assistant/message", assistant("a3", [{"type": "text", "text": f"Fixed.{text}"}], turn=2),
           surface_op="append", source_event_seqs=[])
    append("step/end", {"turn": 2, "step": 1})
    append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    return session
