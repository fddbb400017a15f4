"""Stored DSH logs in legacy shapes (wire dicts), as DSH's coordinator contract writes them."""

from __future__ import annotations

from typing import Any

Wire = dict[str, Any]


def legacy_message_log() -> list[Wire]:
    """A complete turn from before messages had wrappers and ids; seq 6 prunes the result at seq 5."""
    return [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "user/message", "seq": 1, "time": 2, "surfaceOp": "append",
         "data": {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}},
        {"type": "step/start", "seq": 2, "time": 3, "data": {"turn": 1, "step": 1}},
        {"type": "assistant/message", "seq": 3, "time": 4, "surfaceOp": "append",
         "data": {"turn": 1, "step": 1,
                  "content": [{"type": "tool-call", "id": "call-1", "name": "read", "arguments": "{}"}],
                  "provenance": {"provider": "mock", "model": "mock"}}},
        {"type": "tool/call", "seq": 4, "time": 5,
         "data": {"turn": 1, "step": 1, "callId": "call-1", "name": "read", "arguments": "{}"}},
        {"type": "tool/result", "seq": 5, "time": 6, "sourceEventSeqs": [4], "surfaceOp": "append",
         "data": {"turn": 1, "step": 1, "callId": "call-1",
                  "content": [{"type": "text", "text": "full result"}], "isError": False}},
        {"type": "tool/result", "seq": 6, "time": 8, "sourceEventSeqs": [5],
         "surfaceOp": {"op": "replace", "start": 5, "end": 5},
         "data": {"turn": 1, "step": 1, "callId": "call-1",
                  "content": [{"type": "text", "text": "pruned"}], "isError": False}},
        {"type": "step/end", "seq": 7, "time": 9, "data": {"turn": 1, "step": 1}},
        {"type": "turn/end", "seq": 8, "time": 10, "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]


STEERING_MESSAGE_ID = "steer-1"


def _user(message_id: str, text: str) -> Wire:
    return {"id": message_id, "role": "user", "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"}}


def _turn_start(seq: int, turn: int, trigger: Wire | None = None) -> Wire:
    trigger = trigger or {"kind": "message", "source": {"kind": "user"}}
    return {"type": "turn/start", "seq": seq, "time": seq + 1, "data": {"turn": turn, "trigger": trigger}}


def _turn_end(seq: int, turn: int, reason: Wire) -> Wire:
    return {"type": "turn/end", "seq": seq, "time": seq + 1, "data": {"turn": turn, "reason": reason}}


def _step(seq: int, turn: int, edge: str) -> Wire:
    return {"type": f"step/{edge}", "seq": seq, "time": seq + 1, "data": {"turn": turn, "step": 1}}


def pre_react_loop_log() -> list[Wire]:
    """Seven turns in the vocabulary before the react-loop refactor: triggers, steering, old reasons."""
    return [
        _turn_start(0, 1),
        {"type": "user/message", "seq": 1, "time": 2, "data": _user("prompt-1", "old prompt"),
         "surfaceOp": "append"},
        _step(2, 1, "start"),
        {"type": "steering/message", "seq": 3, "time": 4, "surfaceOp": "append",
         "data": {"turn": 1, "message": _user(STEERING_MESSAGE_ID, "old steering")}},
        _step(4, 1, "end"),
        _turn_end(5, 1, {"kind": "completed"}),
        _turn_start(6, 2, {"kind": "retry"}),
        _step(7, 2, "start"),
        _step(8, 2, "end"),
        _turn_end(9, 2, {"kind": "error", "step": 1,
                         "failure": {"message": "old provider failure", "code": "SERVER"}}),
        _turn_start(10, 3),
        _turn_end(11, 3, {"kind": "aborted"}),
        _turn_start(12, 4),
        _turn_end(13, 4, {"kind": "disposed"}),
        _turn_start(14, 5),
        _step(15, 5, "start"),
        _step(16, 5, "end"),
        _turn_end(17, 5, {"kind": "error", "step": 1, "message": "old thrown value"}),
        _turn_start(18, 6),
        _turn_end(19, 6, {"kind": "error", "step": 0, "failure": {
            "message": "old detailed provider failure", "code": "RATE_LIMIT", "status": 429,
            "providerRetryAfterMs": 1000, "requestId": "request-1"}}),
        _turn_start(20, 7),
        _turn_end(21, 7, {"kind": "error", "step": 0, "message": "old coded error", "code": "CODED"}),
    ]


UPGRADED_TURN_ENDS: list[Wire] = [
    {"turn": 1, "reason": {"kind": "completed"}},
    {"turn": 2, "reason": {"kind": "error", "error": {"message": "old provider failure", "code": "SERVER"}}},
    {"turn": 3, "reason": {"kind": "aborted", "reason": {"kind": "legacy"}}},
    {"turn": 4, "reason": {"kind": "aborted", "reason": {"kind": "disposed"}}},
    {"turn": 5, "reason": {"kind": "error", "error": {"message": "old thrown value", "code": "UNKNOWN"}}},
    {"turn": 6, "reason": {"kind": "error", "error": {
        "message": "old detailed provider failure", "code": "RATE_LIMIT", "status": 429,
        "providerRetryAfterMs": 1000, "requestId": "request-1"}}},
    {"turn": 7, "reason": {"kind": "error", "error": {"message": "old coded error", "code": "CODED"}}},
]
"""The ``turn/end`` data of ``pre_react_loop_log`` after the upgrade, in order."""


def _turn_end0(reason: Any, **extra: Any) -> Wire:
    return {"type": "turn/end", "seq": 0, "time": 1, "data": {"turn": 1, **extra, "reason": reason}}


MALFORMED_LEGACY: list[tuple[str, Wire, str]] = [
    ("turn-start-null-trigger", {"type": "turn/start", "seq": 0, "time": 1,
                                 "data": {"turn": 1, "trigger": None}},
     "malformed pre-react-loop turn/start"),
    ("steering-extra-key", {"type": "steering/message", "seq": 0, "time": 1, "surfaceOp": "append",
                            "data": {"turn": 1, "content": [], "source": {"kind": "user"}, "extra": True}},
     "malformed pre-react-loop steering/message"),
    ("steering-null-data", {"type": "steering/message", "seq": 0, "time": 1, "surfaceOp": "append",
                            "data": None},
     "malformed pre-react-loop steering/message"),
    ("turn-end-completed-extra", _turn_end0({"kind": "completed", "extra": True}),
     "malformed pre-react-loop turn/end"),
    ("turn-end-null-reason", _turn_end0(None), "malformed pre-react-loop turn/end"),
    ("turn-end-with-step", _turn_end0({"kind": "completed"}, step=1), "malformed pre-react-loop turn/end"),
    ("turn-end-aborted-extra", _turn_end0({"kind": "aborted", "extra": True}),
     "malformed pre-react-loop turn/end"),
    ("turn-end-disposed-extra", _turn_end0({"kind": "disposed", "extra": True}),
     "malformed pre-react-loop turn/end"),
    ("turn-end-error-negative-step", _turn_end0({"kind": "error", "step": -1, "message": "bad step"}),
     "malformed pre-react-loop turn/end"),
    ("turn-end-error-numeric-code",
     _turn_end0({"kind": "error", "step": 0, "message": "bad code", "code": 1}),
     "malformed pre-react-loop turn/end"),
]
"""DSH's ten malformed legacy shapes: (name, stored event, expected error fragment)."""
