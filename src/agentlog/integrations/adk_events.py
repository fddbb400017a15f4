"""Google ADK events (their JSON form) -> agentlog wire events: the ADK event kept whole, plus turns,
steps and messages where it carries content (pure; no ADK import).

Each ADK event becomes one ignorable ``adk/event`` record holding ``Event.model_dump(mode="json",
exclude_none=True)`` (what ``get_session`` rebuilds the event from), followed by what agentlog's
own tools read: a user's text opens a turn with a ``user/message``; a model's text, thoughts and
function calls are one ``assistant/message`` in a step of their own; a function response is a
``tool/call`` + ``tool/result`` pair (a ``user/message`` with the tool's source when no logged call
is open). A final response (model content with no call, response or long-running tool) closes the
turn, so a session at rest is balanced; a new invocation closes any turn still open.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from agentlog.core.events import (
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
)
from agentlog.core.jsonvalue import dumps
from agentlog.integrations.responses_events import ItemEvents

__all__ = ["ADK_EVENT", "ADK_SESSION", "ADK_STATE", "PROVIDER", "AdkEvents", "record"]

ADK_EVENT: Final = "adk/event"
"""An ADK event whole: ``{"event": <Event JSON>}`` (ignorable: DSH and older readers skip it)."""
ADK_SESSION: Final = "adk/session"
"""A session's creation: ``{"appName", "userId", "id", "state", "createTime"}`` (ignorable)."""
ADK_STATE: Final = "adk/state"
"""A delta of an app's or a user's shared state: ``{"delta": {...}}`` (ignorable)."""
PROVIDER: Final = "google-adk"
"""The provider named in the assistant messages' source (ADK events do not name one)."""
_RECORDS: Final = frozenset({ADK_EVENT, ADK_SESSION})


def record(kind: str, seq: int, time: int, data: Mapping[str, Any]) -> dict[str, Any]:
    """One ignorable wire record of the ADK vocabulary."""
    return {"type": kind, "seq": seq, "time": time, "data": data, "ignorable": True}


class AdkEvents(ItemEvents):
    """Wire events for ADK events, continuing a log; ``resume`` rebuilds the position from the log.

    ``last_record`` is the seq of the latest ``adk/session`` or ``adk/event`` record (-1 before any):
    the session's revision, which a repair of an interrupted turn does not change.
    """

    def __init__(self, *, seq: int = 0, turn: int = 1, time: int = 0,
                 new_id: Callable[[], str] | None = None) -> None:
        super().__init__(seq=seq, turn=turn, time=time, provider=PROVIDER, model="unknown",
                         new_id=new_id or (lambda: str(uuid.uuid4())))
        self.invocation: str | None = None
        self.last_record = -1

    @classmethod
    def resume(cls, events: Iterable[Event]) -> AdkEvents:
        """The builder positioned after ``events`` (a balanced or open log of this mapping)."""
        builder = cls()
        for event in events:
            builder._replay(event)
        return builder

    def _replay(self, event: Event) -> None:
        kind, data = event.type, event.data
        self.seq = event.seq + 1
        if kind == TURN_START:
            self.turn, self.open_turn, self.steps, self.spoke = data["turn"], True, 0, False
        elif kind == TURN_END:
            self.open_turn, self.step, self.turn = False, 0, data["turn"] + 1
        elif kind == STEP_START:
            self.step = self.steps = data["step"]
            self.step_has_message = self.step_work = False
            self.pending = set()
        elif kind == STEP_END:
            self.step = 0
        elif kind == ASSISTANT_MESSAGE:
            for block in data["message"]["content"]:
                if block.get("type") == "tool-call":
                    self.open[block["id"]] = (block["name"], block["arguments"])
                    self.pending.add(block["id"])
            self.spoke = self.step_has_message = True
        elif kind == TOOL_RESULT:
            call_id = data["message"]["source"].get("callId")
            self.open.pop(call_id, None)
            self.pending.discard(call_id)
            self.spoke = self.step_work = True
        elif kind == USER_MESSAGE and data["source"].get("kind") == "tool":
            self.spoke = self.step_work = True
        elif kind in _RECORDS:
            self.last_record = event.seq
            if kind == ADK_EVENT:
                self.invocation = data["event"].get("invocation_id")

    # -- one ADK event ---------------------------------------------------------------------

    def session_record(self, data: Mapping[str, Any], time: int) -> list[dict[str, Any]]:
        """The creation record of a new session (its first event)."""
        self.events, self.time = [], time
        self.last_record = self._record(ADK_SESSION, data)
        return self.events

    def adk_event(self, event: Mapping[str, Any], time: int) -> list[dict[str, Any]]:
        """The wire events of one ADK event (JSON form, temp state already trimmed)."""
        self.events, self.time = [], time
        invocation = event.get("invocation_id")
        if self.open_turn and invocation != self.invocation:
            self.end_turn()
        self.invocation = invocation
        self.last_record = self._record(ADK_EVENT, {"event": event})
        content = event.get("content") or {}
        parts: Sequence[Mapping[str, Any]] = content.get("parts") or ()
        texts = [part for part in parts if part.get("text") is not None]
        calls = [part["function_call"] for part in parts if part.get("function_call")]
        responses = [part["function_response"] for part in parts if part.get("function_response")]
        if event.get("author") == "user" and content.get("role", "user") == "user":
            if texts:
                self._user(texts)
        elif texts or calls:
            self._model(texts, calls, event)
        for response in responses:
            self._response(response)
        if (event.get("author") != "user" and (texts or calls) and not calls and not responses
                and not event.get("long_running_tool_ids")):
            self.end_turn()  # a final response: the session at rest is balanced
        return self.events

    def _record(self, kind: str, data: Mapping[str, Any]) -> int:
        self.events.append(record(kind, self.seq, self.time, data))
        self.seq += 1
        return self.seq - 1

    def _user(self, texts: Sequence[Mapping[str, Any]]) -> None:
        if self.spoke:
            self.end_turn()
        self.ensure_step()
        blocks = [{"type": "text", "text": part["text"]} for part in texts]
        self.emit(USER_MESSAGE, {"id": self.new_id(), "role": "user", "content": blocks,
                                 "source": {"kind": "user"}}, op="append")

    def _model(self, texts: Sequence[Mapping[str, Any]], calls: Sequence[Mapping[str, Any]],
               event: Mapping[str, Any]) -> None:
        self.ensure_turn()
        if self.step and (self.step_has_message or self.step_work):
            self.end_step()
        self.ensure_step()
        blocks: list[dict[str, Any]] = [
            {"type": "reasoning" if part.get("thought") else "text", "text": part["text"]} for part in texts]
        for call in calls:
            call_id = _call_id(call)
            arguments = dumps(call.get("args") or {}).decode()
            blocks.append({"type": "tool-call", "id": call_id, "name": call.get("name") or "",
                           "arguments": arguments})
            self.open[call_id] = (call.get("name") or "", arguments)
            self.pending.add(call_id)
        model = event.get("model_version") or event.get("author") or "unknown"
        message = {"id": self.new_id(), "role": "assistant", "content": blocks,
                   "source": {"kind": "model", "provider": PROVIDER, "model": model}}
        self.emit(ASSISTANT_MESSAGE, self.in_step({"message": message}), op="append")
        self.spoke = self.step_has_message = True

    def _response(self, response: Mapping[str, Any]) -> None:
        text = dumps(response.get("response") or {}).decode()
        self.tool_result({"type": "tool-result", "toolCallId": _call_id(response),
                          "content": [{"type": "text", "text": text}], "isError": False})


def _call_id(part: Mapping[str, Any]) -> str:
    """A function call's or response's id; ADK leaves it unset for some models: then its name."""
    return str(part.get("id") or part.get("name") or "call")
