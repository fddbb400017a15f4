"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) as agentlog sessions.

``response_item`` records are the conversation: the reasoning, messages and tool calls the model
produced between two tool outputs make one step, ``function_call_output`` and
``custom_tool_call_output`` are its results. A user message that Codex also reports as an
``event_msg`` ``user_message`` opens a turn; the other user messages (AGENTS.md,
``<environment_context>``) are injected context. ``turn_context`` gives the model,
``token_count`` the step's usage, ``turn_aborted`` ends a turn ``aborted``. The other
``event_msg`` records repeat what the response items hold and are counted, not kept.
"""

from __future__ import annotations

import os
from typing import Any, Final

import orjson

from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import freeze
from agentlog.io.importers.builder import Imported, LogBuilder, text_blocks
from agentlog.io.importers.source import Line, SourceFile, iso_ms, jsonl_records

__all__ = ["import_codex"]

EXPECTED: Final = ('a Codex CLI rollout: JSON lines {"timestamp", "type": "session_meta"|"response_item"|'
                   '"event_msg"|"turn_context", "payload"}, the first a session_meta')
_OUTPUTS: Final = ("function_call_output", "custom_tool_call_output")
_REPEATS: Final = frozenset({"user_message", "agent_message", "agent_reasoning"})
"""``event_msg`` types that repeat a response item (the prompt, the reply text, the reasoning summary)."""


def _texts(content: Any) -> list[Any]:
    blocks: list[Any] = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            blocks.extend(text_blocks(part["text"]))
    return blocks


def _usage(info: Any) -> dict[str, int] | None:
    """``token_count.info.last_token_usage`` as TokenUsage (cached input counted apart)."""
    last = info.get("last_token_usage") if isinstance(info, dict) else None
    if not isinstance(last, dict) or type(last.get("input_tokens")) is not int:
        return None
    cached = last.get("cached_input_tokens") if type(last.get("cached_input_tokens")) is int else 0
    usage = {"inputTokens": last["input_tokens"] - cached,
             "outputTokens": last["output_tokens"] if type(last.get("output_tokens")) is int else 0}
    if cached:
        usage["cacheReadTokens"] = cached
    if type(last.get("reasoning_output_tokens")) is int and last["reasoning_output_tokens"]:
        usage["reasoningTokens"] = last["reasoning_output_tokens"]
    return usage


def _output(raw: Any) -> tuple[list[Any], Any, bool]:
    """A tool output's text, its metadata (exit code, duration) and whether it failed."""
    text = raw if isinstance(raw, str) else orjson.dumps(raw).decode()
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text_blocks(text), None, False
    if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
        metadata = parsed.get("metadata")
        code = metadata.get("exit_code") if isinstance(metadata, dict) else None
        return text_blocks(parsed["output"]), metadata, type(code) is int and code != 0
    return text_blocks(text), None, False


class _Rollout:
    """Folds rollout records in order into a ``LogBuilder``."""

    def __init__(self, meta: dict[str, Any], prompts: set[str], created_at: int) -> None:
        self.builder = LogBuilder(created_at)
        self.prompts = prompts
        self.provider = str(meta.get("model_provider") or "openai")
        self.model = "unknown"
        self.reply: list[Any] = []
        self.encrypted: list[str] = []
        self.usage: dict[str, int] | None = None  # the next (or current) reply's
        self.total: Any = None
        self.reply_time: int | None = None
        instructions = meta.get("base_instructions", meta.get("instructions"))
        if isinstance(instructions, dict):
            instructions = instructions.get("text")
        self.builder.system(instructions if isinstance(instructions, str) else None)

    def _token_count(self, info: Any) -> None:
        """A response's usage: Codex writes it after the response's items (0.77) or before them
        (0.40), and repeats the last count between turns (same totals: not a new response)."""
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        usage = _usage(info)
        if usage is None or (total is not None and total == self.total):
            return
        self.total = total
        self.usage = usage

    def _flush(self) -> None:
        if not self.reply:
            return
        self.builder.at(self.reply_time)
        replay = {"openai": {"encryptedContent": self.encrypted}} if self.encrypted else None
        self.builder.reply(self.reply, id=f"reply-{self.builder.seq}", provider=self.provider,
                           model=self.model, usage=self.usage, replay_state=replay)
        self.reply, self.encrypted, self.usage = [], [], None

    def _produce(self, block: dict[str, Any], time: int | None) -> None:
        if not self.reply:
            self.reply_time = time
        self.reply.append(block)

    def feed(self, line: Line) -> None:
        record = line.value
        kind, payload = record.get("type"), record.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        time = iso_ms(record.get("timestamp"))
        if kind == "response_item":
            self._item(line, payload, time)
        elif kind == "turn_context":
            self.model = str(payload.get("model") or self.model)
        elif kind == "event_msg" and payload.get("type") == "token_count":
            self._token_count(payload.get("info"))
        elif kind == "event_msg" and payload.get("type") == "turn_aborted":
            self._flush()
            self.builder.at(time)
            self.builder.end_turn({"kind": "aborted", "reason": {"kind": "user"}})
        elif kind == "event_msg" and str(payload.get("type")) in _REPEATS:
            pass
        elif kind == "event_msg":
            self.builder.note(f"event_msg/{payload.get('type')} record")
        else:
            self.builder.note(f"{kind} record")

    def _item(self, line: Line, item: dict[str, Any], time: int | None) -> None:
        kind = item.get("type")
        if kind == "message" and item.get("role") == "assistant":
            self._produce({"type": "text", "text": "\n".join(b["text"] for b in _texts(item.get("content")))},
                          time)
        elif kind == "reasoning":
            parts = _texts(item.get("summary")) + _texts(item.get("content"))
            summary = "\n\n".join(block["text"] for block in parts)
            self._produce({"type": "reasoning", "text": summary}, time)
            if isinstance(item.get("encrypted_content"), str):
                self.encrypted.append(item["encrypted_content"])
        elif kind in ("function_call", "custom_tool_call") and isinstance(item.get("call_id"), str):
            arguments = item.get("arguments", item.get("input"))
            self._produce({"type": "tool-call", "id": item["call_id"], "name": str(item.get("name", "")),
                           "arguments": arguments if isinstance(arguments, str) else ""}, time)
        elif kind in _OUTPUTS and isinstance(item.get("call_id"), str):
            self._flush()
            self.builder.at(time)
            content, meta, failed = _output(item.get("output"))
            self.builder.tool_result(item["call_id"], content, id=f"result-{line.number}", is_error=failed,
                                     meta=meta)
        elif kind == "message":
            self._flush()
            self.builder.at(time)
            blocks = _texts(item.get("content"))
            text = "\n".join(block["text"] for block in blocks)
            human = item.get("role") == "user" and text in self.prompts
            source = None if item.get("role") == "user" else {"kind": "plugin", "plugin": "import",
                                                                "role": str(item.get("role"))}
            self.builder.user(blocks, id=f"message-{line.number}", source=source, new_turn=human)
        else:
            self.builder.note(f"response_item/{kind} record")

    def finish(self, header: SessionHeader) -> Imported:
        self._flush()
        return self.builder.finish(header)


def import_codex(source: SourceFile) -> list[Imported]:
    """The session of one Codex rollout."""
    lines = list(jsonl_records(source, EXPECTED))
    meta_line = next((line for line in lines if line.value.get("type") == "session_meta"), None)
    if meta_line is None or not isinstance(meta_line.value.get("payload"), dict) or not isinstance(
            meta_line.value["payload"].get("id"), str):
        raise source.error(f"no session_meta record with an id; expected {EXPECTED}")
    meta = meta_line.value["payload"]
    prompts = [line.value["payload"].get("message") for line in lines
               if line.value.get("type") == "event_msg" and isinstance(line.value.get("payload"), dict)
               and line.value["payload"].get("type") == "user_message"]
    created = max(0, iso_ms(meta.get("timestamp")) or iso_ms(meta_line.value.get("timestamp")) or 0)
    rollout = _Rollout(meta, {p for p in prompts if isinstance(p, str)}, created)
    for line in lines:
        if line is not meta_line:
            rollout.feed(line)
    origin: dict[str, Any] = {"format": "codex", "file": source.name}
    for key in ("originator", "cli_version", "source", "git"):
        if meta.get(key) is not None:
            origin[key] = meta[key]
    cwd = meta.get("cwd") if isinstance(meta.get("cwd"), str) and os.path.isabs(meta["cwd"]) else None
    header = SessionHeader(id=meta["id"], created_at=created, cwd=cwd, extra=freeze({"importedFrom": origin}))
    return [rollout.finish(header)]
