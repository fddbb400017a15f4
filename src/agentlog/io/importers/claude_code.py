"""Claude Code transcripts (``~/.claude/projects/<project>/<session>.jsonl``) as agentlog sessions.

One API response is written as several ``assistant`` records sharing ``message.id`` (a block
each), with the results of its tool calls in ``user`` records between them: they become one
step. A ``compact_boundary`` record and the ``isCompactSummary`` user record after it become a
real compaction whose checkpoint holds Claude's summary, so the surface after the import is
what Claude saw. A sidechain file (``<session>/subagents/agent-<id>.jsonl``) becomes a child
session linked to its parent (``parentSession``, ``origin: subagent``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from agentlog.core.header import SessionHeader
from agentlog.core.jsonvalue import dumps, freeze
from agentlog.io.importers.builder import Imported, LogBuilder, text_blocks
from agentlog.io.importers.source import Line, SourceFile, iso_ms, jsonl_records, without_torn_tail

__all__ = ["companions", "import_claude_code"]

EXPECTED: Final = ("Claude Code JSONL: one record per line with type user/assistant/system/progress "
                   "and a sessionId (~/.claude/projects/<project>/<session>.jsonl)")
PROVIDER: Final = "anthropic"
_INTERRUPTED: Final = "[Request interrupted by user"


@dataclass(slots=True)
class _Reply:
    line: Line
    id: str
    model: str
    content: list[Any] = field(default_factory=list)
    usage: dict[str, int] | None = None
    signatures: list[str] = field(default_factory=list)


def _text(value: Any) -> str | None:
    """A non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _record_id(line: Line) -> str:
    """A record's ``uuid``, or its line number when it has none."""
    return _text(line.value.get("uuid")) or f"line-{line.number}"


def companions(path: Path) -> list[Path]:
    """The sidechain files of a main transcript: ``<stem>/subagents/*.jsonl``, sorted."""
    folder = path.with_suffix("") / "subagents"
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


def usage_of(raw: Any) -> dict[str, int] | None:
    """Anthropic usage as agentlog TokenUsage (the counts are disjoint already)."""
    if not isinstance(raw, dict):
        return None
    names = (("input_tokens", "inputTokens"), ("output_tokens", "outputTokens"),
             ("cache_read_input_tokens", "cacheReadTokens"),
             ("cache_creation_input_tokens", "cacheWriteTokens"))
    usage = {ours: raw[theirs] for theirs, ours in names if type(raw.get(theirs)) is int}
    return usage or None


def _result_content(content: Any, builder: LogBuilder) -> list[Any]:
    if isinstance(content, str):
        return text_blocks(content)
    blocks: list[Any] = []
    for block in content if isinstance(content, list) else ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            blocks.append({"type": "text", "text": block["text"]})
        else:
            builder.note(f"{kind or 'unknown'} block in a tool result (kept as a placeholder)")
            blocks.append({"type": "text", "text": f"[{kind} block not imported]"})
    return blocks


class _Session:
    """The records of one transcript, folded in order into a ``LogBuilder``."""

    def __init__(self, source: SourceFile, first: Line) -> None:
        self.source = source
        self.first = first.value
        self.builder = LogBuilder(iso_ms(first.value.get("timestamp")) or 0)
        self.reply: _Reply | None = None
        self.flushed = True
        self.boundary: dict[str, Any] | None = None
        self.model = "unknown"
        self.results: list[tuple[Line, dict[str, Any]]] = []
        self.todos: list[Any] = []

    def feed(self, line: Line) -> None:
        record = line.value
        kind = record.get("type")
        if kind == "assistant" and isinstance(record.get("message"), dict):
            self._assistant(line, record["message"])
        elif kind == "user" and isinstance(record.get("message"), dict):
            self._user(line, record)
        elif kind == "system" and record.get("subtype") == "compact_boundary":
            self._flush()
            if self.boundary is not None:
                self.builder.note("compact_boundary without its summary")
            self.boundary = record
        elif kind == "system":
            self.builder.note(f"system/{record.get('subtype')} record")
        else:
            self.builder.note(f"{kind} record")

    def _assistant(self, line: Line, message: dict[str, Any]) -> None:
        self.model = _text(message.get("model")) or self.model
        message_id = _text(message.get("id"))
        reply = self.reply
        if reply is None or message_id is None or reply.id != message_id or self.flushed:
            self._flush()
            if reply is not None and message_id is not None and reply.id == message_id:
                message_id = f"{message_id}:{_record_id(line)}"  # the rest of a reply already written
            reply = _Reply(line, message_id or _record_id(line), self.model)
            self.reply, self.flushed = reply, False
        reply.usage = usage_of(message.get("usage")) or reply.usage
        for block in _list(message.get("content")):
            self._assistant_block(reply, block)

    def _assistant_block(self, reply: _Reply, block: Any) -> None:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            reply.content.append({"type": "text", "text": block["text"]})
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            reply.content.append({"type": "reasoning", "text": block["thinking"]})
            if isinstance(block.get("signature"), str):
                reply.signatures.append(block["signature"])
        elif kind == "tool_use" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
            arguments = dumps(block.get("input", {})).decode()
            reply.content.append({"type": "tool-call", "id": block["id"], "name": block["name"],
                                  "arguments": arguments})
        else:
            self.builder.note(f"assistant {kind} block")

    def _flush(self) -> None:
        """Write the buffered reply, then the tool results that came with it."""
        reply = self.reply
        if reply is not None and not self.flushed:
            self.builder.at(iso_ms(reply.line.value.get("timestamp")))
            replay = {"anthropic": {"signatures": reply.signatures}} if reply.signatures else None
            self.builder.reply(reply.content, id=reply.id, provider=PROVIDER, model=reply.model,
                               usage=reply.usage, replay_state=replay)
            self.flushed = True
        for line, block in self.results:
            self._tool_result(line, block)
        self.results = []

    def _tool_result(self, line: Line, block: dict[str, Any]) -> None:
        record = line.value
        self.builder.at(iso_ms(record.get("timestamp")))
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str) or not call_id:
            self.builder.note("tool_result without a tool_use_id")
            return
        meta = record.get("toolUseResult")
        self.builder.tool_result(call_id, _result_content(block.get("content"), self.builder),
                                 id=f"{record.get('uuid') or line.number}:{call_id}",
                                 is_error=block.get("is_error") is True, meta=meta)

    def _user(self, line: Line, record: dict[str, Any]) -> None:
        content = record["message"].get("content")
        if record.get("isCompactSummary") is True:
            self._compaction(line, content)
            return
        blocks = text_blocks(content) if isinstance(content, str) else []
        for block in _list(content):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_result":
                self.results.append((line, block))
            elif kind == "text" and isinstance(block.get("text"), str):
                blocks.append({"type": "text", "text": block["text"]})
            else:
                self.builder.note(f"user {kind} block (kept as a placeholder)")
                blocks.append({"type": "text", "text": f"[{kind} block not imported]"})
        if not blocks:
            if not self.reply or self.flushed:  # results of a reply already written
                self._flush()
            return
        self._flush()
        self.builder.at(iso_ms(record.get("timestamp")))
        text = " ".join(block.get("text", "") for block in blocks)
        if text.startswith(_INTERRUPTED):
            self.builder.end_turn({"kind": "aborted", "reason": {"kind": "user"}})
        human = record.get("isMeta") is not True and not text.startswith(_INTERRUPTED)
        self.builder.user(blocks, id=_record_id(line), new_turn=human)
        todos = record.get("todos")
        if isinstance(todos, list) and todos and todos != self.todos:
            self.builder.todos(todos)
            self.todos = todos

    def _compaction(self, line: Line, content: Any) -> None:
        self._flush()
        record = line.value
        boundary, self.boundary = self.boundary, None
        if boundary is None:
            self.builder.note("compact summary without its compact_boundary")
            boundary = {}
        metadata = _object(boundary.get("compactMetadata"))
        tokens: int = metadata["preTokens"] if type(metadata.get("preTokens")) is int else 0
        summary = text_blocks(content) if isinstance(content, str) else _result_content(content, self.builder)
        self.builder.at(iso_ms(boundary.get("timestamp")) or iso_ms(record.get("timestamp")))
        self.builder.compaction(summary, id=_record_id(line),
                                compaction_id=str(boundary.get("uuid") or f"line-{line.number}"),
                                tokens=tokens, provider=PROVIDER, model=self.model)

    def finish(self) -> Imported:
        self._flush()
        if self.boundary is not None:
            self.builder.note("compact_boundary without its summary")
        return self.builder.finish(self.header())

    def header(self) -> SessionHeader:
        first = self.first
        session_id = str(first["sessionId"])
        origin: dict[str, Any] = {"format": "claude-code", "file": self.source.name,
                                  "sessionId": session_id}
        for key in ("version", "gitBranch", "agentId", "slug"):
            if isinstance(first.get(key), str):
                origin[key] = first[key]
        cwd = first.get("cwd") if isinstance(first.get("cwd"), str) and os.path.isabs(first["cwd"]) else None
        sidechain = first.get("isSidechain") is True and isinstance(first.get("agentId"), str)
        return SessionHeader(
            id=f"{session_id}-agent-{first['agentId']}" if sidechain else session_id,
            created_at=max(0, iso_ms(first.get("timestamp")) or 0), cwd=cwd,
            parent_session=session_id if sidechain else None,
            origin="subagent" if sidechain else None, delegation_depth=1 if sidechain else None,
            extra=freeze({"importedFrom": origin}),
        )


def _records(source: SourceFile) -> Iterable[Line]:
    return jsonl_records(source, EXPECTED)


def import_claude_code(source: SourceFile) -> list[Imported]:
    """The session of one Claude Code transcript (a sidechain file: the child session); a last
    line that Claude Code was killed while writing is left out with a warning."""
    source, torn = without_torn_tail(source)
    session: _Session | None = None
    skipped: list[Line] = []
    for line in _records(source):
        kind = line.value.get("type")
        if session is None:
            if kind in ("user", "assistant") and isinstance(line.value.get("sessionId"), str):
                session = _Session(source, line)
                for early in skipped:
                    session.feed(early)
            elif isinstance(kind, str):
                skipped.append(line)
                continue
            else:
                raise source.error(f"a record without a type; expected {EXPECTED}", line=line.number,
                                   offset=line.offset)
        session.feed(line)
    if session is None:
        raise source.error(f"no user or assistant record with a sessionId; expected {EXPECTED}")
    imported = session.finish()
    return [imported if torn is None else dataclasses.replace(imported, warnings=(torn,))]
