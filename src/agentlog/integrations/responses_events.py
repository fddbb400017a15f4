"""A list of Responses API items -> the events of well-formed agentlog turns and steps (pure).

The inverse of ``messages_to_items``: each user-side item becomes a ``user/message`` (a new
turn once the model has spoken), each run of model-side items one ``assistant/message`` in
its own step, each tool output a ``tool/call`` + ``tool/result`` pair (in the step of its
call, else in a step of its own). An output whose call is not open (popped, cleared, answered
already, never seen) is a ``user/message`` with the tool's source instead: a ``tool/result``
there would break the surface's tool pairing. Every message keeps its item shells, so deriving
the messages back and calling ``messages_to_items`` gives the items unchanged.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from agentlog.core.events import (
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
)
from agentlog.core.header import now_ms
from agentlog.core.jsonvalue import freeze
from agentlog.core.session import Session
from agentlog.errors import InvalidEventError, UsageError
from agentlog.integrations.responses_items import REPLAY_KEY, item_side, split_item, split_items

__all__ = ["ItemEvents", "append_events", "next_turn", "responses_events", "unanswered_calls"]


class ItemEvents:
    """Wire events for items, continuing a log at ``seq`` whose next turn number is ``turn``."""

    def __init__(self, *, seq: int, turn: int, time: int, provider: str, model: str,
                 new_id: Callable[[], str], open_calls: Mapping[str, tuple[str, str]] | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.seq, self.turn, self.time = seq, turn, time
        self.provider, self.model, self.new_id = provider, model, new_id
        self.open: dict[str, tuple[str, str]] = dict(open_calls or {})  # unanswered: id -> (name, arguments)
        self.open_turn = False
        self.step = 0  # open step number, 0 when none
        self.steps = 0
        self.spoke = False  # the open turn has model output or tool results
        self.step_has_message = False
        self.step_work = False  # the open step has tool calls logged
        self.pending: set[str] = set()  # calls of the open step's assistant message without a result

    def emit(self, kind: str, data: dict[str, Any], *, op: Any = None,
             sources: Sequence[int] | None = None) -> int:
        event: dict[str, Any] = {"type": kind, "seq": self.seq, "time": self.time, "data": data}
        if sources is not None:
            event["sourceEventSeqs"] = list(sources)
        if op is not None:
            event["surfaceOp"] = op
        self.events.append(event)
        self.seq += 1
        return self.seq - 1

    def ensure_turn(self) -> None:
        if not self.open_turn:
            self.emit(TURN_START, {"turn": self.turn})
            self.open_turn, self.steps, self.spoke = True, 0, False

    def ensure_step(self) -> None:
        self.ensure_turn()
        if not self.step:
            self.steps += 1
            self.step = self.steps
            self.emit(STEP_START, {"turn": self.turn, "step": self.step})
            self.step_has_message = self.step_work = False
            self.pending = set()

    def end_step(self) -> None:
        if self.step:
            self.emit(STEP_END, {"turn": self.turn, "step": self.step})
            self.step = 0

    def end_turn(self) -> None:
        if self.open_turn:
            self.end_step()
            self.emit(TURN_END, {"turn": self.turn, "reason": {"kind": "completed"}})
            self.open_turn = False
            self.turn += 1

    def in_step(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"turn": self.turn, "step": self.step, **(extra or {})}

    def user_item(self, item: Any) -> None:
        if self.spoke:
            self.end_turn()
        self.ensure_step()
        blocks, shell = split_item(item)
        source = {"kind": "user", "replayState": {REPLAY_KEY: [shell]}}
        self.emit(USER_MESSAGE, {"id": self.new_id(), "role": "user", "content": blocks, "source": source},
                  op="append")

    def assistant(self, group: Sequence[Any]) -> None:
        self.ensure_turn()
        if self.step and (self.step_has_message or self.step_work):
            self.end_step()
        self.ensure_step()
        blocks, shells = split_items(group)
        for block in blocks:
            if block["type"] == "tool-call":
                self.open[block["id"]] = (block["name"], block["arguments"])
                self.pending.add(block["id"])
        source = {"kind": "model", "provider": self.provider, "model": self.model,
                  "replayState": {REPLAY_KEY: shells}}
        message = {"id": self.new_id(), "role": "assistant", "content": blocks, "source": source}
        self.emit(ASSISTANT_MESSAGE, self.in_step({"message": message}), op="append")
        self.spoke = self.step_has_message = True

    def result_item(self, item: Any) -> None:
        (block,), shell = split_item(item)
        self.tool_result(block, {"replayState": {REPLAY_KEY: [shell]}})

    def tool_result(self, block: dict[str, Any], source: Mapping[str, Any] | None = None) -> None:
        """A ``tool-result`` block: a ``tool/call`` + ``tool/result`` pair in its call's step (a step
        of its own when the call is in an earlier one), a ``user/message`` when no call is open.
        ``source`` adds to the message's tool source."""
        call_id = block["toolCallId"]
        if call_id not in self.pending:  # its call is in an earlier step (or not open): a step of its own
            self.end_step()
            self.ensure_step()
        self.pending.discard(call_id)
        message = {"id": self.new_id(), "role": "user", "content": [block],
                   "source": {"kind": "tool", "callId": call_id, **(source or {})}}
        opened = self.open.pop(call_id, None)
        if opened is None:  # no open call to pair with: the same message, off the tool-pairing count
            self.emit(USER_MESSAGE, message, op="append")
        else:
            name, arguments = opened
            call = self.emit(TOOL_CALL, self.in_step({"callId": call_id, "name": name,
                                                      "arguments": arguments}))
            self.emit(TOOL_RESULT, self.in_step({"message": message}), op="append", sources=[call])
        self.spoke = self.step_work = True


def unanswered_calls(messages: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """The tool calls of ``messages`` (a surface, in order) no result answers yet: id -> (name, arguments)."""
    calls: dict[str, tuple[str, str]] = {}
    for message in messages:
        for block in message.get("content") or ():
            kind = block.get("type")
            if kind == "tool-call":
                calls[block["id"]] = (block.get("name", ""), block.get("arguments", ""))
            elif kind == "tool-result":
                calls.pop(block.get("toolCallId"), None)
    return calls


def _checked(items: Sequence[Any]) -> list[Any]:
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise InvalidEventError(f"Responses items must be a list of objects, got {type(items).__name__}")
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidEventError(f"Responses item {index} is not an object: {type(item).__name__}",
                                    path=f"items[{index}]")
        freeze(item, root=f"items[{index}]", what=f"Responses item {index} is not plain JSON")
    return list(items)


def responses_events(items: Sequence[Any], *, seq: int = 0, turn: int = 1, time: int | None = None,
                     provider: str = "openai", model: str = "unknown",
                     open_calls: Mapping[str, tuple[str, str]] | None = None,
                     new_id: Callable[[], str] | None = None) -> list[dict[str, Any]]:
    """The wire events (``seq`` onward, turns from ``turn``) logging ``items``; every turn is closed.

    ``open_calls`` are the calls logged before and still unanswered (``unanswered_calls`` of the
    surface); an output pairs with one of those or of ``items``, any other is logged as a
    ``user/message`` with the tool's source. ``provider``/``model`` go in the assistant
    messages' source (items do not say which model produced them). No item is dropped: those
    agentlog has no block for are kept whole (see ``agentlog.integrations.responses_items``); what
    the events cannot carry is the items' timing (one ``time`` for all) and the model of each
    response. Refuses a non-object or non-JSON item, naming its index.
    """
    builder = ItemEvents(seq=seq, turn=turn, time=now_ms() if time is None else time, provider=provider,
                         model=model, new_id=new_id or (lambda: str(uuid.uuid4())), open_calls=open_calls)
    checked = _checked(items)
    group: list[Any] = []
    for item in checked:
        side = item_side(item)
        if side == "output":
            group.append(item)
            continue
        if group:
            builder.assistant(group)
            group = []
        if side == "input":
            builder.user_item(item)
        else:
            builder.result_item(item)
    if group:
        builder.assistant(group)
    builder.end_turn()
    return builder.events


def next_turn(session: Session) -> int:
    """The number the next turn gets; refuses while a turn is open (someone else is recording)."""
    for event in reversed(session.events):
        if event.type == TURN_START:
            raise UsageError(f"turn {event.data['turn']} of session {session.id!r} is still open; "
                             "only whole turns can be logged after it", session_id=session.id)
        if event.type == TURN_END:
            return int(event.data["turn"]) + 1
    return 1


def append_events(session: Session, events: Sequence[Mapping[str, Any]]) -> list[Event]:
    """Append wire events built for ``session.seq`` onward (their seq and time are the session's)."""
    return [session.append(event["type"], event["data"], surface_op=event.get("surfaceOp"),
                           source_event_seqs=event.get("sourceEventSeqs")) for event in events]
