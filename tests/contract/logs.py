"""Small, well-formed event logs for the store contract suite (wire dicts, DSH shapes)."""

from __future__ import annotations

from typing import Any

from agentlog import Event, SessionHeader
from agentlog.store.base import Store

Wire = dict[str, Any]


class LogBuilder:
    """Appends DSH-shaped wire events with contiguous seqs."""

    def __init__(self, start: int = 0, time: int = 1000) -> None:
        self.events: list[Wire] = []
        self.seq = start
        self.time = time

    def add(self, type: str, data: Any, **extra: Any) -> Wire:
        event: Wire = {"type": type, "seq": self.seq, "time": self.time, "data": data, **extra}
        self.events.append(event)
        self.seq += 1
        self.time += 1
        return event

    def user(self, text: str, turn: int) -> Wire:
        return self.add("user/message", {"id": f"u{self.seq}", "role": "user", "source": {"kind": "user"},
                                         "content": [{"type": "text", "text": text}]}, surfaceOp="append")

    def assistant(self, turn: int, step: int, text: str, calls: tuple[str, ...] = ()) -> Wire:
        content: list[Any] = [{"type": "text", "text": text}]
        content += [{"type": "tool-call", "id": call, "name": "read_file", "arguments": "{}"}
                    for call in calls]
        message = {"id": f"a{self.seq}", "role": "assistant", "content": content,
                   "source": {"kind": "model", "provider": "p", "model": "m"}}
        return self.add("assistant/message", {"turn": turn, "step": step, "message": message},
                        sourceEventSeqs=[], surfaceOp="append")

    def tool_call(self, turn: int, step: int, call: str) -> Wire:
        return self.add("tool/call", {"turn": turn, "step": step, "callId": call, "name": "read_file",
                                      "arguments": "{}"})

    def tool_result(self, turn: int, step: int, call: str, call_seq: int) -> Wire:
        message = {"id": f"r{self.seq}", "role": "user", "source": {"kind": "tool", "callId": call},
                   "content": [{"type": "tool-result", "toolCallId": call,
                                "content": [{"type": "text", "text": "ok"}]}]}
        return self.add("tool/result", {"turn": turn, "step": step, "message": message},
                        sourceEventSeqs=[call_seq], surfaceOp="append")

    def turn(self, turn: int, *, close: bool = True, chunks: int = 3) -> None:
        """A complete one-step turn: user message, chunks, assistant reply."""
        self.add("turn/start", {"turn": turn})
        self.add("step/start", {"turn": turn, "step": 1})
        self.user(f"question {turn}", turn)
        for index in range(chunks):
            self.add("assistant/chunk", {"turn": turn, "step": 1,
                                         "chunk": {"type": "text-delta", "index": 0, "text": f"w{index} "}})
        self.assistant(turn, 1, f"answer {turn}")
        self.add("step/end", {"turn": turn, "step": 1})
        if close:
            self.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def wire(events: list[Event]) -> list[Wire]:
    """Events as plain wire objects (JSON round trip), for equality checks."""
    import orjson

    return [orjson.loads(event.to_json()) for event in events]


def plant(store: Store, header: SessionHeader, log: list[Wire]) -> None:
    """Store ``log`` as another writer (DSH, a damaged disk) might have left it: through the
    backend's storage hook, past the append checks that keep agentlog from storing it."""
    store._append_batch(header, [Event.from_wire(event) for event in log], materialize=True)
