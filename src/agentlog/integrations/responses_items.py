"""OpenAI Responses API items <-> agentlog messages: the pure, SDK-free mapping both ways.

Each item splits into content blocks (what every adapter reads: ``text``, ``reasoning``,
``tool-call``, ``tool-result``) and a *shell*: the item with those strings set to None, kept
in the message's ``source.replayState.openaiResponses``. Joining shell and blocks gives the item
back exactly (ids, status, annotations, ``encrypted_content``, key order), so a message logged
from items, or by the Responses stream adapter, replays as the very items the API produced.

What has no agentlog block is kept, never dropped: message parts other than text/refusal
(images, files, audio) and items other than messages, reasoning, tool calls and their outputs
(web search, file search, MCP, image generation, item references, compaction ...) become
``{"type": "responses-item", "item": ...}`` blocks holding the JSON as it came. Other
providers' adapters show those blocks as JSON text. Developer and system messages are logged as
user messages (agentlog has no such role); their role is in the shell. A message whose blocks
were changed after logging (compaction, pruning) no longer matches its shells and is rebuilt
from its blocks; reasoning blocks without shells are then dropped (the API needs their ids).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, Literal

from agentlog.core.jsonvalue import dumps, thaw
from agentlog.core.repair import NOT_STARTED_TEXT
from agentlog.core.session import Session
from agentlog.integrations.openai_messages import _text_of

__all__ = [
    "OPAQUE",
    "REPLAY_KEY",
    "Side",
    "item_side",
    "items_of_message",
    "join_item",
    "messages_to_items",
    "responses_request",
    "responses_tools",
    "responses_usage",
    "split_item",
    "split_items",
    "to_responses_input",
]

OPAQUE: Final = "responses-item"
"""The block type holding an item (or message part) agentlog has no block for, as JSON."""
REPLAY_KEY: Final = "openaiResponses"
"""The ``source.replayState`` key of a message's item shells."""
Side = Literal["input", "output", "result"]
"""Where an item sits: sent by the user, produced by the model, or a tool's output."""

_TEXT_PARTS: Final = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
_OUTPUT_TYPES: Final = frozenset({
    "reasoning", "function_call", "custom_tool_call", "web_search_call", "file_search_call",
    "computer_call", "code_interpreter_call", "image_generation_call", "local_shell_call", "shell_call",
    "apply_patch_call", "mcp_call", "mcp_list_tools", "mcp_approval_request", "compaction",
})
"""Item types the model produces (they join the assistant message of their step)."""


class _MismatchError(Exception):
    """Shells that no longer fit their message's blocks (the blocks were rewritten)."""


def _opaque(value: Any) -> dict[str, Any]:
    return {"type": OPAQUE, "item": value}


def _is_str(value: Any) -> bool:
    return type(value) is str


def _is_call(item: Mapping[str, Any]) -> bool:
    """A model-side tool call the client answers with a ``<type>_output`` item."""
    kind = item.get("type")
    return (isinstance(kind, str) and kind.endswith("_call") and _is_str(item.get("call_id"))
            and bool(item["call_id"]) and kind in _OUTPUT_TYPES)


def _is_output(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    return (isinstance(kind, str) and kind.endswith("_call_output") and _is_str(item.get("call_id"))
            and bool(item["call_id"]))


def _is_message(item: Mapping[str, Any]) -> bool:
    return item.get("type", "message") == "message" and _is_str(item.get("role"))


def item_side(item: Mapping[str, Any]) -> Side:
    """Which message an item belongs to: a user message, the model's, or a tool result."""
    if _is_output(item):
        return "result"
    if _is_message(item):
        return "output" if item["role"] == "assistant" else "input"
    return "output" if item.get("type") in _OUTPUT_TYPES else "input"


# -- one item <-> blocks and a shell ------------------------------------------------------------


def _split_parts(parts: Sequence[Any], kind: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """Text-like parts -> ``kind`` blocks (shell part keeps all but the text), others opaque."""
    blocks: list[dict[str, Any]] = []
    shells: list[Any] = []
    for part in parts:
        field = _TEXT_PARTS.get(str(part.get("type"))) if isinstance(part, Mapping) else None
        if kind == "reasoning" and isinstance(part, Mapping):
            field = "text"
        if field is not None and _is_str(part.get(field)):
            blocks.append({"type": kind, "text": part[field]})
            shells.append({**part, field: None})
        else:
            blocks.append(_opaque(part))
            shells.append(None)
    return blocks, shells


def _join_parts(shells: Sequence[Any], blocks: Sequence[Any], kind: str) -> list[Any]:
    parts: list[Any] = []
    for shell, block in zip(shells, blocks, strict=True):
        if shell is None:
            parts.append(_expect(block, OPAQUE)["item"])
            continue
        field = "text" if kind == "reasoning" else _TEXT_PARTS[shell["type"]]
        parts.append({**shell, field: _expect(block, kind)["text"]})
    return parts


def _expect(block: Any, kind: str) -> Any:
    if not isinstance(block, Mapping) or block.get("type") != kind:
        raise _MismatchError
    if kind in ("text", "reasoning") and not _is_str(block.get("text")):
        raise _MismatchError
    return block


def split_item(item: Mapping[str, Any]) -> tuple[list[dict[str, Any]], Any]:
    """``(blocks, shell)`` of one item; ``join_item(shell, blocks) == item``. Every item gives a block."""
    item = dict(thaw(item))
    if _is_message(item):
        content = item.get("content")
        if _is_str(content):
            return [{"type": "text", "text": content}], {**item, "content": None}
        if isinstance(content, list):
            blocks, shells = _split_parts(content, "text")
            return blocks or [{"type": "text", "text": ""}], {**item, "content": shells}
    elif item.get("type") == "reasoning" and isinstance(item.get("summary"), list) and (
        isinstance(item.get("content", []), list)
    ):
        summary, summary_shells = _split_parts(item["summary"], "reasoning")
        shell = {**item, "summary": summary_shells}
        blocks = summary
        if "content" in item:
            content, content_shells = _split_parts(item["content"], "reasoning")
            blocks = summary + content
            shell["content"] = content_shells
        return blocks or [{"type": "reasoning", "text": ""}], shell
    elif _is_call(item):
        return _split_call(item)
    elif _is_output(item):
        return _split_output(item)
    return [_opaque(item)], None


def split_items(items: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[Any]]:
    """The blocks of ``items`` in order and their shells: one message's content and replay state."""
    blocks: list[dict[str, Any]] = []
    shells: list[Any] = []
    for item in items:
        item_blocks, shell = split_item(item)
        blocks += item_blocks
        shells.append(shell)
    return blocks, shells


def _split_call(item: dict[str, Any]) -> tuple[list[dict[str, Any]], Any]:
    kind = item["type"]
    name, arguments = item.get("name"), item.get("arguments" if kind == "function_call" else "input")
    if kind in ("function_call", "custom_tool_call") and _is_str(name) and name and _is_str(arguments):
        field = "arguments" if kind == "function_call" else "input"
        block = {"type": "tool-call", "id": item["call_id"], "name": name, "arguments": arguments}
        return [block], {**item, "call_id": None, "name": None, field: None}
    rest = {k: v for k, v in item.items() if k not in ("type", "id", "call_id", "status")}
    block = {"type": "tool-call", "id": item["call_id"], "name": kind, "arguments": dumps(rest).decode()}
    return [block], {**item, "call_id": None}


def _split_output(item: dict[str, Any]) -> tuple[list[dict[str, Any]], Any]:
    output = item.get("output")
    if _is_str(output):
        content: list[dict[str, Any]] = [{"type": "text", "text": output}]
        shell_output: Any = None
    elif isinstance(output, list):
        content, shell_output = _split_parts(output, "text")
    else:
        content, shell_output = [_opaque(output)], None
    block = {"type": "tool-result", "toolCallId": item["call_id"], "content": content, "isError": False}
    return [block], {**item, "call_id": None, "output": shell_output}


def _width(shell: Any) -> int:
    """How many blocks the item of ``shell`` split into."""
    if shell is None or not isinstance(shell, Mapping):
        return 1
    if _is_message(shell):
        content = shell.get("content")
        return 1 if content is None else max(1, len(content))
    if shell.get("type") == "reasoning":
        return max(1, len(shell.get("summary") or ()) + len(shell.get("content") or ()))
    return 1


def join_item(shell: Any, blocks: Sequence[Any]) -> Any:
    """The item ``split_item`` took apart into ``shell`` and ``blocks``; ``_MismatchError`` if they differ."""
    if shell is None:
        (block,) = blocks
        return thaw(_expect(block, OPAQUE)["item"])
    shell = thaw(shell)
    if _is_message(shell):
        content = shell["content"]
        if content is None:
            (block,) = blocks
            return {**shell, "content": _expect(block, "text")["text"]}
        return {**shell, "content": _join_parts(content, blocks[: len(content)], "text")}
    if shell.get("type") == "reasoning":
        summary = shell["summary"]
        item = {**shell, "summary": _join_parts(summary, blocks[: len(summary)], "reasoning")}
        if "content" in shell:
            end = len(summary) + len(shell["content"])
            item["content"] = _join_parts(shell["content"], blocks[len(summary):end], "reasoning")
        return item
    (block,) = blocks
    if shell.get("type", "").endswith("_output"):
        return _join_output(shell, _expect(block, "tool-result"))
    _expect(block, "tool-call")
    item = {**shell, "call_id": block["id"]}
    if "name" in shell and shell["name"] is None:
        item["name"] = block["name"]
    for field in ("arguments", "input"):
        if field in shell and shell[field] is None:
            item[field] = block["arguments"]
    return item


def _join_output(shell: dict[str, Any], block: Any) -> dict[str, Any]:
    content = thaw(block.get("content"))
    output = shell["output"]
    if isinstance(output, list):
        if not isinstance(content, list) or len(content) != len(output):
            raise _MismatchError
        value: Any = _join_parts(output, content, "text")
    elif isinstance(content, list) and len(content) == 1 and isinstance(content[0], Mapping) and (
        content[0].get("type") == OPAQUE
    ):
        value = content[0]["item"]
    else:
        value = _text_of(content)
    return {**shell, "call_id": block["toolCallId"], "output": value}


# -- messages -> items --------------------------------------------------------------------------


def _shells(message: Any) -> Any:
    source = message.get("source")
    replay = source.get("replayState") if isinstance(source, Mapping) else None
    return replay.get(REPLAY_KEY) if isinstance(replay, Mapping) else None


def _from_shells(shells: Sequence[Any], blocks: Sequence[Any]) -> list[Any]:
    items: list[Any] = []
    at = 0
    for shell in shells:
        width = _width(shell)
        if at + width > len(blocks):
            raise _MismatchError
        items.append(join_item(shell, blocks[at: at + width]))
        at += width
    if at != len(blocks):
        raise _MismatchError
    return items


def items_of_message(message: Mapping[str, Any]) -> list[Any]:
    """The items of one agentlog message: exactly those it was logged from when its shells fit."""
    blocks = message.get("content") or ()
    shells = _shells(message)
    if isinstance(shells, (list, tuple)):
        try:
            return _from_shells(shells, blocks)
        except (_MismatchError, ValueError, KeyError, TypeError, AttributeError):
            pass  # rewritten since it was logged: rebuild it from its blocks
    return list(_canonical(message))


def _canonical(message: Mapping[str, Any]) -> Iterator[Any]:
    """Items rebuilt from blocks: text runs as easy messages, calls, results, opaque items."""
    role = "assistant" if message.get("role") == "assistant" else "user"
    run: list[Any] = []
    for block in [*(message.get("content") or ()), None]:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind in ("text", "image") or (kind is not None and kind not in (
            "reasoning", "tool-call", "tool-result", OPAQUE)
        ):
            run.append(block)
            continue
        if run:
            yield {"role": role, "content": _text_of(run)}
            run = []
        if kind == "tool-call":
            yield {"type": "function_call", "call_id": block["id"], "name": block.get("name", ""),
                   "arguments": block.get("arguments", "")}
        elif kind == "tool-result":
            yield {"type": "function_call_output", "call_id": block.get("toolCallId", ""),
                   "output": _text_of(block.get("content"))}
        elif kind == OPAQUE:
            yield thaw(block.get("item"))


def messages_to_items(messages: Sequence[Mapping[str, Any]], *, answer_calls: bool = False) -> list[Any]:
    """The items of ``messages`` in order; ``answer_calls`` makes them a valid request input.

    With ``answer_calls`` every tool call gets an output before the next message (a synthetic
    "never ran" one where the log has none) and an output whose call left the surface becomes
    user text, as the API refuses both an unanswered call and an orphan output.
    """
    out: list[Any] = []
    pending: dict[str, str] = {}  # call id -> output type

    def answer() -> None:
        out.extend({"type": kind, "call_id": call_id, "output": NOT_STARTED_TEXT}
                   for call_id, kind in pending.items())
        pending.clear()

    for message in messages:
        items = items_of_message(message)
        if not answer_calls:
            out += items
            continue
        if message.get("role") == "assistant":
            answer()
        for item in items:
            side = item_side(item)
            if side == "result":
                call_id = item["call_id"]
                if call_id in pending:  # a result the app logged is a function_call_output: fix its type
                    out.append({**item, "type": pending.pop(call_id)})
                    continue
                answer()
                text = _text_of(split_item(item)[0][0]["content"])
                out.append({"role": "user", "content": f"[result of tool call {call_id}]\n{text}"})
                continue
            if side == "input":
                answer()
            out.append(item)
            if side == "output" and _is_call(item):
                pending[item["call_id"]] = f"{item['type']}_output"
    answer()
    return out


# -- the next request ---------------------------------------------------------------------------


def to_responses_input(session: Session) -> list[Any]:
    """The next request's ``input`` items from ``derive_messages()``, every call answered."""
    return messages_to_items(session.derive_messages(), answer_calls=True)


def responses_tools(session: Session) -> list[dict[str, Any]]:
    """The latest request header's tools as Responses function tools (``[]`` when none).

    ``strict`` is False: the SDK type requires the key, and agentlog's schemas are not written to
    strict mode's rules (every property required, no additional properties).
    """
    header = session.request_header()
    tools = header.get("tools") if header is not None else None
    return [{"type": "function", "name": tool["name"], "description": tool.get("description", ""),
             "parameters": thaw(tool.get("parameters") or {"type": "object", "properties": {}}),
             "strict": False}
            for tool in tools or ()]


def responses_request(session: Session,
                      messages: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """``input`` plus ``instructions`` (the header's system prompt) and ``tools`` when present.

    ``input`` is the whole history (``messages``, by default ``derive_messages()``), every call
    answered: do not combine it with ``previous_response_id``.
    """
    chosen = session.derive_messages() if messages is None else messages
    body: dict[str, Any] = {"input": messages_to_items(chosen, answer_calls=True)}
    header = session.request_header()
    system = header.get("system") if header is not None else None
    if system:
        body["instructions"] = _text_of(system)
    tools = responses_tools(session)
    if tools:
        body["tools"] = tools
    return body


def responses_usage(raw: Mapping[str, Any] | None) -> dict[str, int] | None:
    """Responses usage as agentlog TokenUsage (cached input counted apart from fresh input)."""
    if not raw:
        return None
    fresh, output = raw.get("input_tokens"), raw.get("output_tokens")
    if type(fresh) is not int or type(output) is not int:
        return None
    cached = (raw.get("input_tokens_details") or {}).get("cached_tokens")
    reasoning = (raw.get("output_tokens_details") or {}).get("reasoning_tokens")
    usage = {"inputTokens": fresh - cached if type(cached) is int else fresh, "outputTokens": output}
    if type(cached) is int:
        usage["cacheReadTokens"] = cached
    if type(reasoning) is int:
        usage["reasoningTokens"] = reasoning
    return usage
