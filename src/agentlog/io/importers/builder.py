"""Well-formed agentlog turns and steps from a foreign transcript, built in memory (pure).

Every importer reduces its format to a few calls — a user message, an assistant reply with
its tool calls, a tool result, a compaction — and ``LogBuilder`` writes them as DSH writes a
live session: ``turn/start``, ``step/start``, ``request/header`` when the route changes,
``assistant/message``, one ``tool/call`` per call, ``tool/result`` citing it, ``step/end``,
``turn/end``. Times come from the source; what cannot be placed is counted, never dropped
silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentlog.core.events import Event
from agentlog.core.header import SessionHeader
from agentlog.errors import AgentlogError

__all__ = ["Imported", "LogBuilder", "text_blocks"]

ORPHAN_RESULT = "tool result without its call in the same step (kept as a user message)"


@dataclass(frozen=True, slots=True)
class Imported:
    """One session an importer produced: its header, its events, and what it could not map."""

    header: SessionHeader
    events: tuple[Event, ...]
    unmapped: Mapping[str, int] = field(default_factory=dict)
    """Source facts with no place in the log, counted per kind (never lost silently)."""
    warnings: tuple[str, ...] = ()
    """What the import left out of the source and why (a torn last line), for the user to see."""

    @property
    def turns(self) -> int:
        """How many turns the log holds."""
        return sum(1 for event in self.events if event.type == "turn/start")


def text_blocks(text: str) -> list[dict[str, Any]]:
    """One text block (none for an empty string)."""
    return [{"type": "text", "text": text}] if text else []


class LogBuilder:
    """Appends source facts as wire events with the source's times; ``finish`` closes the log."""

    def __init__(self, created_at: int) -> None:
        self.unmapped: Counter[str] = Counter()
        self._wire: list[dict[str, Any]] = []
        self._time = created_at
        self._turn = 0
        self._turn_open = False
        self._step = 0
        self._step_open = False
        self._calls: dict[str, int] = {}  # call id -> its tool/call seq, in the open step
        self._answered: set[str] = set()
        self._surface: list[int] = []
        self._system: str | None = None
        self._tools: list[Any] | None = None
        self._header: dict[str, Any] | None = None

    @property
    def seq(self) -> int:
        """The seq the next event gets."""
        return len(self._wire)

    def at(self, time: int | None) -> None:
        """Events from here on carry ``time`` (epoch ms); None keeps the previous time."""
        if time is not None:
            self._time = time

    def note(self, kind: str, count: int = 1) -> None:
        """Count a source fact the log has no place for."""
        self.unmapped[kind] += count

    def _emit(self, kind: str, data: Any, *, append: bool = False, closing: bool = False,
              replace: tuple[int, int] | None = None, sources: Sequence[int] | None = None) -> int:
        """Append one wire event; a ``closing`` one (step/turn end) takes the time of the event before it."""
        seq = len(self._wire)
        time = self._wire[-1]["time"] if closing and self._wire else self._time
        event: dict[str, Any] = {"type": kind, "seq": seq, "time": time, "data": data}
        if sources is not None:
            event["sourceEventSeqs"] = list(sources)
        if append:
            event["surfaceOp"] = "append"
            self._surface.append(seq)
        elif replace is not None:
            event["surfaceOp"] = {"op": "replace", "start": replace[0], "end": replace[1]}
            first = self._surface.index(replace[0])
            self._surface[first:self._surface.index(replace[1]) + 1] = [seq]
        self._wire.append(event)
        return seq

    # -- turns and steps --------------------------------------------------------------------

    def start_turn(self) -> None:
        """Close the open turn (completed) and open the next one."""
        self.end_turn()
        self._turn += 1
        self._step = 0
        self._turn_open = True
        self._emit("turn/start", {"turn": self._turn})

    def _end_step(self) -> None:
        if self._step_open:
            self._emit("step/end", {"turn": self._turn, "step": self._step}, closing=True)
            self._step_open = False
            self._calls = {}
            self._answered = set()

    def end_turn(self, reason: Mapping[str, Any] | None = None) -> None:
        """Close the open step and turn; ``reason`` defaults to completed."""
        self._end_step()
        if self._turn_open:
            self._emit("turn/end", {"turn": self._turn, "reason": dict(reason or {"kind": "completed"})},
                       closing=True)
            self._turn_open = False

    # -- messages -----------------------------------------------------------------------------

    def user(self, content: Sequence[Any], *, id: str, source: Mapping[str, Any] | None = None,
             new_turn: bool = True) -> int:
        """A user message; by default it opens a new turn (a human prompt), else it joins the log
        where it stands (injected context)."""
        if new_turn:
            self.start_turn()
        return self._emit("user/message", {"id": id, "role": "user", "content": list(content),
                                           "source": dict(source or {"kind": "user"})}, append=True)

    def todos(self, todos: Sequence[Any]) -> None:
        """A ``todo/write`` snapshot of the task list (inside a turn, where DSH logs it)."""
        if not self._turn_open:
            self.start_turn()
        self._emit("todo/write", {"todos": list(todos)})

    def system(self, text: str | None) -> None:
        """The system prompt of the requests from here on (logged in the next request header)."""
        self._system = text or None

    def tools(self, tools: Sequence[Any] | None) -> None:
        """The tool schemas ``{name, description, parameters}`` of the requests from here on."""
        self._tools = list(tools) if tools else None

    def reply(self, content: Sequence[Any], *, id: str, provider: str, model: str,
              usage: Mapping[str, Any] | None = None, replay_state: Any = None,
              extra: Mapping[str, Any] | None = None) -> None:
        """One model call: a step with its request header, ``assistant/message`` and ``tool/call``s."""
        if not self._turn_open:
            self.start_turn()
        self._end_step()
        self._step += 1
        self._step_open = True
        self._emit("step/start", {"turn": self._turn, "step": self._step})
        self._request_header(provider, model)
        source: dict[str, Any] = {"kind": "model", "provider": provider, "model": model}
        if replay_state is not None:
            source["replayState"] = replay_state
        data: dict[str, Any] = {"turn": self._turn, "step": self._step,
                                "message": {"id": id, "role": "assistant", "content": list(content),
                                            "source": source}}
        if usage:
            data["usage"] = dict(usage)
        if extra:
            data.update(extra)
        self._emit("assistant/message", data, append=True)
        for block in content:
            if block.get("type") != "tool-call":
                continue
            if block["id"] in self._calls:
                self.note("repeated tool call id in one reply")
                continue
            self._calls[block["id"]] = self._emit("tool/call", {
                "turn": self._turn, "step": self._step, "callId": block["id"], "name": block["name"],
                "arguments": block["arguments"]})

    def _request_header(self, provider: str, model: str) -> None:
        header: dict[str, Any] = {"config": {"provider": provider, "model": model}}
        if self._system:
            header["system"] = self._system
        if self._tools:
            header["tools"] = self._tools
        if header != self._header:
            reason = "initial" if self._header is None else "change"
            self._emit("request/header", {"header": header, "reason": reason})
            self._header = header

    def pending(self) -> list[str]:
        """Call ids of the open step that have no result yet, in call order."""
        return [call for call in self._calls if call not in self._answered]

    def tool_result(self, call_id: str, content: Sequence[Any], *, id: str, is_error: bool = False,
                    meta: Any = None, error: Mapping[str, Any] | None = None) -> None:
        """The result of a call of the open step; any other result is kept as a user message."""
        block = {"type": "tool-result", "toolCallId": call_id, "content": list(content), "isError": is_error}
        call_seq = self._calls.get(call_id)
        if call_seq is None or call_id in self._answered or not self._step_open:
            self.note(ORPHAN_RESULT)
            self.user([block], id=id, source={"kind": "plugin", "plugin": "import"}, new_turn=False)
            return
        data: dict[str, Any] = {"turn": self._turn, "step": self._step, "message": {
            "id": id, "role": "user", "content": [block], "source": {"kind": "tool", "callId": call_id}}}
        if error is not None:
            data["error"] = dict(error)
        if meta is not None:
            data["meta"] = meta
        self._emit("tool/result", data, append=True, sources=(call_seq,))
        self._answered.add(call_id)

    def compaction(self, summary: Sequence[Any], *, id: str, compaction_id: str, tokens: int,
                   provider: str, model: str) -> None:
        """A compaction that replaced the whole surface with ``summary`` (as Claude Code's does):
        ``compaction/start``, ``compaction/summary``, the checkpoint, ``compaction/end``."""
        self.end_turn()
        checkpoint = {"id": id, "role": "user", "content": list(summary),
                      "source": {"kind": "plugin", "plugin": "compact", "compactionId": compaction_id}}
        shadowed = list(self._surface)
        if not shadowed:  # nothing to replace: the summary opens the log
            self._emit("user/message", checkpoint, append=True)
            return
        start = self._emit("compaction/start", {"compactionId": compaction_id, "turn": None})
        summary_seq = self._emit("compaction/summary", {
            "compactionId": compaction_id, "summary": list(summary),
            "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]}, "shadowedSeqs": shadowed,
            "shadowedTokenCount": tokens, "provider": provider, "model": model})
        self._emit("user/message", checkpoint, replace=(shadowed[0], shadowed[-1]),
                   sources=(start, summary_seq, *shadowed))
        self._emit("compaction/end", {"compactionId": compaction_id, "turn": None})

    def finish(self, header: SessionHeader, reason: Mapping[str, Any] | None = None) -> Imported:
        """Close the open turn (``interrupted`` when the last reply's calls have no result) and
        return the session, validated event by event."""
        if reason is None and self.pending():
            reason = {"kind": "interrupted"}
        self.end_turn(reason)
        events = []
        for wire in self._wire:
            try:
                events.append(Event.from_wire(wire))
            except AgentlogError as exc:  # a source value the log cannot hold: say which event
                raise exc.locate(session_id=header.id, seq=wire["seq"], event_type=wire["type"]) from None
        return Imported(header, tuple(events), dict(sorted(self.unmapped.items())))
