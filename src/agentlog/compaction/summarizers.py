"""Summarizers: ``ExtractiveSummarizer`` (offline, no model) and ``OpenAICompatibleSummarizer``.

Both answer a ``SummaryRequest`` with the eight-section checkpoint of spec compaction S3. The
extractive one quotes the shadowed messages (requests, constraints, paths, errors, outcomes)
within a size budget; the model one streams any OpenAI-compatible chat-completions endpoint
(DeepSeek, OpenAI, vLLM, Ollama) with the request built as S2 and the outcome checked as S4.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from agentlog.compaction.fidelity import (
    ShadowedFacts,
    command_text,
    extract_facts,
    is_tool_result,
    is_user_request,
    message_texts,
    normalize,
    result_lines,
    tool_calls,
    tool_result_call_id,
    tool_result_is_error,
)
from agentlog.compaction.summary import SummaryRequest, SummaryResult
from agentlog.errors import MissingExtraError, SummarizerError
from agentlog.jsonvalue import dumps, freeze, thaw

if TYPE_CHECKING:
    import httpx

__all__ = [
    "SECTIONS",
    "SUMMARY_INSTRUCTION",
    "ExtractiveSummarizer",
    "OpenAICompatibleSummarizer",
    "to_openai_messages",
    "to_openai_tools",
]

SECTIONS: tuple[str, ...] = (
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code",
    "Errors and Fixes",
    "Pending Jobs",
    "Current Work",
    "Next Step",
    "Critical Context",
)
"""The checkpoint's eight sections, in order (spec compaction S3)."""

SUMMARY_INSTRUCTION = """\
Stop working on the task for a moment: your job now is to compact the conversation above. \
Everything before this message is an earlier stretch of a working session between a user and an \
AI assistant. Turn it into a structured checkpoint from which another model can carry on the work \
without losing anything essential.

Write exactly these eight Markdown sections, in this order, each a level-2 heading followed by \
terse bullet points. Under a section with nothing to say, write "(none)".

## Primary Request and Intent
What the user asked for and why. Quote the user's own words verbatim wherever the wording matters.
## Key Technical Concepts
Technologies, frameworks, patterns and terms in play.
## Files and Code
Exact paths of the files read, created or changed, why each matters, and the key changes \
(short code fragments where they are essential).
## Errors and Fixes
Each error met (the exact message), how it was fixed, and what the user said about it.
## Pending Jobs
Work the user asked for that is not finished.
## Current Work
What was being done right before this checkpoint.
## Next Step
One next action, in line with the user's most recent request.
## Critical Context
Decisions and their reasons; every constraint and preference the user stated ("must", "never", \
"don't", "always", "keep", "avoid", "only", ...), quoted verbatim; open questions; any data \
needed to continue.

Rules:
- Write concise English engineering prose, whatever language the conversation used.
- Keep exact paths, commands, error messages, identifiers, numbers, signatures and syntax \
fragments character for character.
- Record the user's feedback and corrections faithfully.
- A <compacted-summary> block in the conversation is an earlier checkpoint: merge it into this \
one, keeping the facts that still hold and dropping those that were superseded, instead of \
copying it forward.
- Do not mention summarizing, checkpoints or that the context was compacted.
- Answer with the checkpoint text only. Do not call any tools."""
"""The instruction appended as the last user message of a model summarization (S3's intent)."""


# -- the extractive summarizer -------------------------------------------------------------------

_KEEP = 100  # priority of items that are never dropped, only shortened as a last resort
_MIN_BUDGET = 400  # the empty skeleton takes 222 characters
_WRITE_TOOLS = re.compile(r"edit|write|patch|replace|create|insert|apply", re.IGNORECASE)
_BACKTICKED = re.compile(r"`([^`\n]{2,60})`")
_MODULE_NAME = re.compile(r"\b[A-Z][A-Za-z0-9]+(?:\.[A-Z][A-Za-z0-9]+)+\b")
_HEADING = re.compile(r"^#{1,6}\s*(?:\d+\.\s*)?(.+?)\s*:?\s*$")
_FIRST_SENTENCE = re.compile(r"^(.{20,240}?[.!?])(?:\s|$)", re.DOTALL)


@dataclass(slots=True)
class _Item:
    """One bullet of the checkpoint; lower ``priority`` (then lower ``order``) is dropped first."""

    section: int
    priority: int
    order: int
    text: str


def _quote(text: str) -> str:
    """A verbatim quote as a bullet; continuation lines are indented so Markdown keeps them."""
    return '"' + text.strip().replace("\n", "\n  ") + '"'


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def _prior_sections(summary: str) -> dict[int, list[str]]:
    """The bullets of an earlier checkpoint, by section index (unknown headings are skipped)."""
    by_name = {normalize(name): index for index, name in enumerate(SECTIONS)}
    found: dict[int, list[str]] = {}
    current: int | None = None
    for line in summary.splitlines():
        heading = _HEADING.match(line) if line.startswith("#") else None
        if heading is not None:
            current = by_name.get(normalize(heading.group(1)))
            continue
        if current is None or not line.strip() or line.strip() == "(none)":
            continue
        bullets = found.setdefault(current, [])
        if line.startswith(("- ", "* ")) or not bullets:
            bullets.append(line[2:] if line.startswith(("- ", "* ")) else line.strip())
        else:
            bullets[-1] += "\n" + line
    return found


class _Draft:
    """Checkpoint items being collected, rendered and cut down to a budget."""

    def __init__(self) -> None:
        self.items: list[_Item] = []
        self.seen: set[tuple[int, str]] = set()

    def add(self, section: int, priority: int, text: str) -> None:
        key = (section, normalize(text))
        if key[1] and key not in self.seen:
            self.seen.add(key)
            self.items.append(_Item(section, priority, len(self.items), text))

    def render(self) -> str:
        parts: list[str] = []
        for index, name in enumerate(SECTIONS):
            ranked = sorted((i for i in self.items if i.section == index),
                            key=lambda i: (-i.priority, i.order))
            bullets = [f"- {i.text}" for i in ranked]
            parts.append(f"## {name}\n" + ("\n".join(bullets) if bullets else "(none)"))
        return "\n\n".join(parts) + "\n"

    def fit(self, budget: int) -> str:
        """Drop the lowest-priority items, then shorten kept ones, until the text fits ``budget``."""
        text = self.render()
        droppable = sorted((i for i in self.items if i.priority < _KEEP), key=lambda i: (i.priority, i.order))
        dropped = 0
        while len(text) > budget and dropped < len(droppable):
            # Drop about as many characters as the text is over, then measure again.
            excess = len(text) - budget
            gone: set[int] = set()
            while excess > 0 and dropped < len(droppable):
                item = droppable[dropped]
                dropped += 1
                gone.add(id(item))
                excess -= len(item.text) + 3
            self.items = [i for i in self.items if id(i) not in gone]
            text = self.render()
        while len(text) > budget:
            longest = max(self.items, key=lambda i: len(i.text), default=None)
            if longest is None or len(longest.text) <= 40:
                return text[:budget]
            longest.text = _clip(longest.text, max(40, len(longest.text) - (len(text) - budget) - 1))
            text = self.render()
        return text


class ExtractiveSummarizer:
    """The offline default: a deterministic checkpoint quoted from the shadowed messages.

    It keeps the user's requests and constraint sentences verbatim, the latest todo state,
    touched files, commands, error strings and outcomes, and merges a prior checkpoint found in
    the range. It fits ``budget_chars`` by dropping the lowest-priority items first: concepts,
    old commands and reads go before errors, outcomes and current work; requests and
    constraints go last. ``max_ratio`` also caps the text at that share of the input's size
    (never below 1,000 characters), so a checkpoint stays smaller than what it replaces; None
    turns that cap off.
    """

    def __init__(
        self,
        budget_chars: int = 16_000,
        *,
        max_ratio: float | None = 0.5,
        provider: str = "agentlog",
        model: str = "extractive",
    ) -> None:
        if budget_chars < _MIN_BUDGET:
            raise ValueError(f"budget_chars must be at least {_MIN_BUDGET}, got {budget_chars}")
        if max_ratio is not None and not 0 < max_ratio <= 1:
            raise ValueError(f"max_ratio must lie in (0, 1], got {max_ratio}")
        self.budget_chars = budget_chars
        self.max_ratio = max_ratio
        self.provider = provider
        self.model = model

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(budget_chars={self.budget_chars}, max_ratio={self.max_ratio})"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize without a model; never fails for lack of content (empty sections say so)."""
        text = self.summarize_text(request.messages)
        return SummaryResult(
            summary=(freeze({"type": "text", "text": text}, root="summary"),),
            provider=self.provider,
            model=self.model,
            max_tokens=request.max_tokens,
        )

    def summarize_text(self, messages: Sequence[Any]) -> str:
        """The checkpoint text for the messages (pure and deterministic)."""
        budget = self.budget_chars
        if self.max_ratio is not None:
            input_chars = sum(len(t) for m in messages for t in message_texts(m))
            input_chars += sum(len(c.arguments) for m in messages for c in tool_calls(m))
            budget = min(budget, max(1_000, int(input_chars * self.max_ratio)))
        draft = _Draft()
        _collect(draft, list(messages))
        return draft.fit(budget)


def _merged_paths(
    actions: Sequence[tuple[str, tuple[str, ...]]], root: str | None,
) -> list[tuple[str, list[str]]]:
    """Touched paths with a project-relative spelling folded into its absolute one."""
    merged: dict[str, list[str]] = {}
    for path, tools in actions:
        absolute = f"{root}/{path}" if root and not path.startswith("/") else path
        key = absolute if absolute in merged or any(p == absolute for p, _t in actions) else path
        bucket = merged.setdefault(key, [])
        bucket.extend(t for t in tools if t not in bucket)
    return list(merged.items())


def _describe_todo(todo: str, messages: list[Any]) -> str:
    """An issue id with the title a tool result showed for it (``ID · Title``), else the todo."""
    if " " in todo:
        return todo
    pattern = re.compile(re.escape(todo) + r"(?![\w.])\W{0,4}[·:\u2013-]\s*([^\n\[]{4,120})")
    title: str | None = None
    for message in messages:
        if is_tool_result(message):
            for text in message_texts(message):
                found = pattern.search(text)
                if found is not None:
                    title = found.group(1).strip()
    return f"{todo}: {title}" if title else todo


class _Walk:
    """One pass over the shadowed messages, adding what the facts alone do not give."""

    def __init__(self, draft: _Draft) -> None:
        self.draft = draft
        self.concepts: dict[str, int] = {}
        self.last_text: str | None = None
        self.recent_calls: list[str] = []
        self.pending_errors: list[str] = []
        self.call_names: dict[str, str] = {}

    def run(self, messages: list[Any]) -> None:
        for message in messages:
            if not isinstance(message, dict):
                continue
            if message.get("role") == "assistant":
                self.assistant(message)
            elif is_tool_result(message):
                self.tool_result(message)
            elif is_user_request(message) and self.pending_errors:
                said = _quote(_clip(" ".join(message_texts(message)), 300))
                for error in self.pending_errors:
                    self.draft.add(3, 50, f"`{error}` — user then said: {said}")
                self.pending_errors = []
        for error in self.pending_errors:
            self.draft.add(3, 45, f"`{error}`")

    def _count(self, names: list[str]) -> None:
        for name in names:
            self.concepts[name] = self.concepts.get(name, 0) + 1

    def assistant(self, message: Any) -> None:
        joined = "\n".join(t for t in message_texts(message) if t.strip())
        if joined:
            self.last_text = joined
            fix = _FIRST_SENTENCE.match(joined.strip())
            suffix = f" — then: {_clip(fix.group(1), 200)}" if fix else ""
            for error in self.pending_errors:
                self.draft.add(3, 45, f"`{error}`{suffix}")
            self.pending_errors = []
            self._count(_BACKTICKED.findall(joined) + _MODULE_NAME.findall(joined))
        for call in tool_calls(message):
            self.call_names[call.id] = call.name
            command = command_text(call.args)
            target = next((v for k, v in call.args.items()
                           if k in ("file_path", "path", "notebook_path") and isinstance(v, str)), None)
            if command is not None:
                first, _newline, more = command.partition("\n")
                shown = _clip(first + (" …" if more else ""), 160)
                self.recent_calls.append(f"{call.name}: {shown}")
                self.draft.add(7, 40, f"Ran: `{shown}`")
            else:
                self.recent_calls.append(f"{call.name} {target}" if target else call.name)

    def tool_result(self, message: Any) -> None:
        text = "\n".join(message_texts(message))
        errors, outcomes = result_lines(text, is_error=tool_result_is_error(message))
        self.pending_errors.extend(errors)
        self._count(_BACKTICKED.findall(text))
        name = self.call_names.get(tool_result_call_id(message) or "", "tool")
        for outcome in outcomes:
            self.draft.add(7, 60, f"{name} result: `{outcome}`")


def _add_prior(draft: _Draft, prior: dict[int, list[str]]) -> None:
    """A prior checkpoint's bullets: requests and quoted constraints stay kept, the others rank
    a little below fresh ones; its Current Work is stale and left out."""
    for bullet in prior.get(0, []):
        draft.add(0, _KEEP, bullet)
    for section, priority in ((1, 15), (2, 30), (3, 35), (4, 75)):
        for bullet in prior.get(section, []):
            draft.add(section, priority, bullet)
    for bullet in prior.get(7, []):
        draft.add(7, _KEEP if bullet.startswith('"') else 55, bullet)


def _add_files(draft: _Draft, facts: ShadowedFacts) -> None:
    for path, tools in _merged_paths(facts.path_actions, facts.project_root):
        writes = any(_WRITE_TOOLS.search(t) for t in tools)
        draft.add(2, 55 if writes else 30, f"`{path}` ({', '.join(tools)})")
    touched = {p for p, _tools in facts.path_actions}
    for path in facts.paths:
        if path not in touched:
            draft.add(2, 25, f"`{path}`")


def _add_work(draft: _Draft, facts: ShadowedFacts, walk: _Walk, prior: dict[int, list[str]],
              messages: list[Any]) -> None:
    for todo in facts.open_todos:
        draft.add(4, 85, f"[ ] {_describe_todo(todo, messages)}")
    if facts.pending_request is not None:
        draft.add(4, 88, f"Latest request: {_quote(facts.pending_request)}")
    if walk.last_text is not None:
        draft.add(5, 70, f"Last assistant note: {_quote(_clip(walk.last_text, 600))}")
    for label in walk.recent_calls[-5:]:
        draft.add(5, 65, f"Recent action: `{label}`")
    if facts.open_todos:
        draft.add(6, 90, f"Continue with: {facts.open_todos[0]}")
    elif facts.pending_request is not None:
        draft.add(6, 90, "Continue the latest request (see Pending Jobs).")
    else:
        for bullet in prior.get(6, []):
            draft.add(6, 80, bullet)


def _collect(draft: _Draft, messages: list[Any]) -> None:
    """Fill the draft: prior checkpoint, requests, walk results, files, work state, constraints."""
    facts = extract_facts(messages)
    prior = _prior_sections(facts.prior_summary) if facts.prior_summary else {}
    _add_prior(draft, prior)
    for request in facts.requests:
        draft.add(0, _KEEP, f"User: {_quote(request)}")
    walk = _Walk(draft)
    walk.run(messages)
    for concept, _count in sorted(walk.concepts.items(), key=lambda kv: -kv[1])[:80]:
        draft.add(1, 20, f"`{concept}`")
    _add_files(draft, facts)
    _add_work(draft, facts, walk, prior, messages)
    for constraint in facts.constraints:
        draft.add(7, _KEEP, _quote(constraint))


# -- the OpenAI-compatible summarizer ------------------------------------------------------------


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise MissingExtraError(
            "OpenAICompatibleSummarizer needs httpx, which is not installed: pip install 'agentlog[llm]'",
            code="MISSING_EXTRA",
        ) from exc
    return httpx


def _refuse_image(session_id: str | None, where: str) -> SummarizerError:
    return SummarizerError(
        f"cannot summarize image content ({where}) through a text-only chat-completions request",
        code="UNSUPPORTED_CONTENT", session_id=session_id,
    )


def _tool_result_content(block: Any, session_id: str | None) -> str:
    inner = block.get("content")
    if isinstance(inner, str):
        return inner
    parts: list[str] = []
    for part in inner if isinstance(inner, (list, tuple)) else ():
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "image":
            raise _refuse_image(session_id, "in a tool result")
        if kind == "text":
            parts.append(str(part.get("text", "")))
        else:
            parts.append(dumps(part).decode())
    return "\n".join(parts)


def _arguments(block: Any) -> str:
    raw = block.get("arguments")
    return raw if isinstance(raw, str) else dumps(raw if raw is not None else {}).decode()


def _convert(message: Any, session_id: str | None) -> list[dict[str, Any]]:
    role = message.get("role") if isinstance(message, dict) else None
    blocks = message.get("content") if isinstance(message, dict) else None
    if isinstance(blocks, str):
        blocks = ({"type": "text", "text": blocks},)
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for block in blocks if isinstance(blocks, (list, tuple)) else ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "image":
            raise _refuse_image(session_id, f"in a {role} message")
        elif kind == "reasoning":
            continue  # providers reject or ignore replayed reasoning; the text carries the facts
        elif kind == "tool-call":
            calls.append({"id": str(block.get("id", "")), "type": "function",
                          "function": {"name": str(block.get("name", "")), "arguments": _arguments(block)}})
        elif kind == "tool-result":
            results.append({"role": "tool", "tool_call_id": str(block.get("toolCallId", "")),
                            "content": _tool_result_content(block, session_id)})
        elif block is not None:
            texts.append(dumps(block).decode())
    if results:
        return results
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
        if calls:
            out["tool_calls"] = calls
        return [out] if texts or calls else []
    return [{"role": role if role in ("system", "user") else "user", "content": "\n".join(texts)}]


def to_openai_messages(messages: Sequence[Any], *, session_id: str | None = None) -> list[dict[str, Any]]:
    """agentlog messages as chat-completions messages (text, tool calls, tool results).

    Text blocks of one message are joined with newlines, each tool result becomes a ``tool``
    message, reasoning is left out; an image anywhere raises UNSUPPORTED_CONTENT.
    """
    converted: list[dict[str, Any]] = []
    for message in messages:
        converted.extend(_convert(message, session_id))
    return converted


def to_openai_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """agentlog tool schemas ``{name, description, parameters}`` as ``{"type": "function", ...}``."""
    converted: list[dict[str, Any]] = []
    for tool in tools:
        plain = thaw(tool)
        if isinstance(plain, dict) and plain.get("type") == "function" and "function" in plain:
            converted.append(plain)
            continue
        function: dict[str, Any] = {"name": plain.get("name", "")}
        if plain.get("description") is not None:
            function["description"] = plain["description"]
        function["parameters"] = plain.get("parameters", {"type": "object", "properties": {}})
        converted.append({"type": "function", "function": function})
    return converted


def _provider_from_url(base_url: str) -> str:
    host = (urlsplit(base_url).hostname or "").lower()
    for name in ("deepseek", "openai", "anthropic", "mistral", "groq", "together", "openrouter"):
        if name in host:
            return name
    if urlsplit(base_url).port == 11434:
        return "ollama"
    return "openai-compatible"


def _retry_after_ms(headers: Any) -> int | None:
    value = headers.get("retry-after-ms") or headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value) / (1000 if headers.get("retry-after-ms") else 1)
    except ValueError:
        return None
    return max(0, math.ceil(seconds * 1000))


_STATUS_CODES = {400: "BAD_REQUEST", 401: "AUTHENTICATION", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                 408: "TIMEOUT", 413: "CONTEXT_WINDOW_EXCEEDED", 422: "BAD_REQUEST", 429: "RATE_LIMITED"}
_CONTEXT_HINT = re.compile(r"context.{0,20}(length|window)|maximum context|too many tokens|too long",
                           re.IGNORECASE)


def _http_error(status: int, body: bytes, headers: Any, session_id: str | None) -> SummarizerError:
    message = body.decode("utf-8", "replace").strip()[:500]
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            message = error["message"]
        elif isinstance(error, str):
            message = error
    code = _STATUS_CODES.get(status, "SERVER_ERROR" if status >= 500 else "HTTP_ERROR")
    if status == 400 and _CONTEXT_HINT.search(message):
        code = "CONTEXT_WINDOW_EXCEEDED"
    return SummarizerError(
        f"summarization request failed with HTTP {status}: {message or '(no body)'}",
        code=code, status=status, retry_after_ms=_retry_after_ms(headers),
        retryable=status in (408, 409, 429) or status >= 500, session_id=session_id,
    )


@dataclass(slots=True)
class _Stream:
    """What the SSE chunks of one completion add up to."""

    text: str = ""
    reasoning: str = ""
    calls: dict[int, dict[str, str]] | None = None
    finish: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None

    def feed(self, chunk: dict[str, Any]) -> None:
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            if isinstance(delta.get("content"), str):
                self.text += delta["content"]
            reasoning = delta.get("reasoning_content", delta.get("reasoning"))
            if isinstance(reasoning, str):
                self.reasoning += reasoning
            for call in delta.get("tool_calls") or ():
                self._call(call)
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])

    def _call(self, call: Any) -> None:
        if not isinstance(call, dict):
            return
        calls = self.calls if self.calls is not None else {}
        self.calls = calls
        slot = calls.setdefault(int(call.get("index", len(calls))), {"id": "", "name": "", "arguments": ""})
        function = call.get("function") or {}
        if call.get("id"):
            slot["id"] = str(call["id"])
        if function.get("name"):
            slot["name"] = str(function["name"])
        if isinstance(function.get("arguments"), str):
            slot["arguments"] += function["arguments"]

    def blocks(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self.reasoning:
            out.append({"type": "reasoning", "text": self.reasoning})
        if self.text:
            out.append({"type": "text", "text": self.text})
        for _index, call in sorted((self.calls or {}).items()):
            out.append({"type": "tool-call", **call})
        return out


def _usage(raw: dict[str, Any] | None) -> dict[str, int] | None:
    """OpenAI/DeepSeek usage as agentlog TokenUsage (disjoint input and cache-read counts)."""
    if raw is None:
        return None
    prompt = raw.get("prompt_tokens")
    completion = raw.get("completion_tokens")
    details = raw.get("prompt_tokens_details") or {}
    cached = raw.get("prompt_cache_hit_tokens", details.get("cached_tokens"))
    reasoning = (raw.get("completion_tokens_details") or {}).get("reasoning_tokens")
    usage: dict[str, int] = {}
    if isinstance(prompt, int):
        usage["inputTokens"] = prompt - cached if isinstance(cached, int) else prompt
    if isinstance(completion, int):
        usage["outputTokens"] = completion
    if isinstance(cached, int):
        usage["cacheReadTokens"] = cached
    if isinstance(reasoning, int):
        usage["reasoningTokens"] = reasoning
    return usage or None


class OpenAICompatibleSummarizer:
    """Summarize through any OpenAI-compatible ``/chat/completions`` endpoint, streaming.

    The request is the shadowed messages in chat form, then one user message holding
    ``SUMMARY_INSTRUCTION``; the conversation's ``system`` and ``tools`` go along unchanged so
    the provider's prompt cache is reused (S2). The API key is read from ``api_key_env`` at call
    time and never logged; without one no Authorization header is sent (local servers).
    Transient failures (HTTP 408/409/429/5xx, connection errors) before the stream starts are
    retried ``max_retries`` times, honouring ``Retry-After`` up to ``max_retry_wait`` seconds.
    Cancelling the awaiting task closes the HTTP stream.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        provider: str | None = None,
        max_tokens: int | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        retry_backoff: float = 1.0,
        max_retry_wait: float = 60.0,
        instruction: str = SUMMARY_INSTRUCTION,
    ) -> None:
        self._httpx = _import_httpx()
        if not base_url or not model:
            raise ValueError("base_url and model must be non-empty")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.provider = provider or _provider_from_url(base_url)
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.max_retry_wait = max_retry_wait
        self.instruction = instruction

    def __repr__(self) -> str:
        return (f"OpenAICompatibleSummarizer(base_url={self.base_url!r}, model={self.model!r}, "
                f"provider={self.provider!r})")

    def cap(self, request: SummaryRequest) -> int:
        """The ``max_tokens`` sent: the constructor's, else the request's, else 8192."""
        return self.max_tokens or request.max_tokens or 8192

    def build_body(self, request: SummaryRequest) -> dict[str, Any]:
        """The chat-completions request body for a summary request (S2)."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend(to_openai_messages(request.messages, session_id=request.session_id))
        messages.append({"role": "user", "content": self.instruction})
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.tools:
            body["tools"] = to_openai_tools(request.tools)
        body["max_tokens"] = self.cap(request)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        return body

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Stream one summary; raise ``SummarizerError`` on any failure (S4)."""
        payload = dumps(self.build_body(request))
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        httpx = self._httpx
        timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, 30.0))
        attempt = 0
        async with httpx.AsyncClient(timeout=timeout) as client:
            while True:
                try:
                    stream = await self._attempt(client, payload, headers, request.session_id)
                    break
                except SummarizerError as exc:
                    delay = self._retry_delay(exc, attempt)
                    if delay is None:
                        raise
                attempt += 1
                await asyncio.sleep(delay)
        return self._result(stream, request)

    def _retry_delay(self, error: SummarizerError, attempt: int) -> float | None:
        if not error.retryable or attempt >= self.max_retries:
            return None
        if error.retry_after_ms is not None:
            delay = error.retry_after_ms / 1000
        else:
            delay = self.retry_backoff * (2 ** attempt)
        return delay if delay <= self.max_retry_wait else None

    async def _attempt(
        self, client: httpx.AsyncClient, payload: bytes, headers: dict[str, str], session_id: str | None,
    ) -> _Stream:
        httpx = self._httpx
        url = f"{self.base_url}/chat/completions"
        try:
            async with client.stream("POST", url, content=payload, headers=headers) as response:
                if response.status_code >= 400:
                    body = await response.aread()
                    raise _http_error(response.status_code, body, response.headers, session_id)
                return await self._read(response, session_id)
        except httpx.TimeoutException as exc:
            raise SummarizerError(f"summarization request timed out after {self.timeout}s ({exc!r})",
                                  code="TIMEOUT", retryable=True, session_id=session_id) from exc
        except httpx.TransportError as exc:
            raise SummarizerError(f"summarization request to {url} failed: {exc!r}",
                                  code="NETWORK", retryable=True, session_id=session_id) from exc

    async def _read(self, response: httpx.Response, session_id: str | None) -> _Stream:
        stream = _Stream()
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                raise SummarizerError(f"malformed stream chunk: {data[:200]!r}", code="PROVIDER_ERROR",
                                      session_id=session_id) from exc
            if not isinstance(chunk, dict):
                continue
            error = chunk.get("error")
            if error is not None:
                detail = error.get("message", error) if isinstance(error, dict) else error
                raise SummarizerError(f"provider reported an error mid-stream: {detail}",
                                      code="PROVIDER_ERROR", session_id=session_id)
            stream.feed(chunk)
        return stream

    def _result(self, stream: _Stream, request: SummaryRequest) -> SummaryResult:
        sid = request.session_id
        cap = self.cap(request)
        if stream.finish is None:
            raise SummarizerError("stream ended before a finish reason (incomplete summary)",
                                  code="PROVIDER_ERROR", session_id=sid)
        if stream.finish == "length":
            raise SummarizerError(f"summary truncated at max_tokens={cap} (incomplete checkpoint)",
                                  code="MAX_TOKENS", session_id=sid)
        if stream.finish not in ("stop", "tool_calls", "function_call", "eos", "end_turn"):
            code = "CONTENT_FILTER" if stream.finish == "content_filter" else "PROVIDER_ERROR"
            raise SummarizerError(f"summarization finished with reason {stream.finish!r}",
                                  code=code, session_id=sid)
        if not stream.text.strip():
            raise SummarizerError("no text summary content", code="EMPTY_SUMMARY", session_id=sid)
        raw = tuple(freeze(block, root="rawOutput") for block in stream.blocks())
        usage = _usage(stream.usage)
        return SummaryResult(
            summary=(freeze({"type": "text", "text": stream.text}, root="summary"),),
            provider=self.provider,
            model=self.model,
            max_tokens=cap,
            usage=freeze(usage, root="usage") if usage is not None else None,
            raw_output=raw,
        )

