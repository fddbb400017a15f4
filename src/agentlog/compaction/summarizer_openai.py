"""``OpenAICompatibleSummarizer``: a checkpoint written by any OpenAI-compatible chat model.

It streams ``/chat/completions`` (DeepSeek, OpenAI, vLLM, Ollama) with the request built as
spec compaction S2 and the outcome checked as S4.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

import orjson

from agentlog.compaction.summary import SummaryRequest, SummaryResult
from agentlog.core.jsonvalue import dumps, freeze
from agentlog.core.openai_wire import (
    CompletionStream,
    http_error,
    provider_from_url,
    to_openai_messages,
    to_openai_tools,
    usage_from_openai,
)
from agentlog.errors import MissingExtraError, SummarizerError

if TYPE_CHECKING:
    import httpx

__all__ = ["SHORTER_FACTOR", "SHORTER_INSTRUCTION", "SUMMARY_INSTRUCTION", "OpenAICompatibleSummarizer"]

SUMMARY_INSTRUCTION = """\
Stop working on the task for a moment: your job now is to compact the conversation above. \
Everything before this message is an earlier stretch of a working session between a user and an \
AI assistant. Turn it into a structured checkpoint from which another model can carry on the work \
without losing anything essential.

Write exactly these eight Markdown sections, in this order, each a level-2 heading followed by \
terse bullet points. Under a section with nothing to say, write "(none)".

## Primary Request and Intent
What the user asked for and why, and every message the user wrote (not tool results), quoted \
verbatim where the wording matters.
## Key Technical Concepts
Technologies, frameworks, patterns and terms in play.
## Files and Code
Exact paths of the files read, created or changed; for each changed file, what the change \
introduced (modules, functions, classes, routes, events) and why (short code fragments where \
they are essential).
## Errors and Fixes
Each error met (the exact message), what fixed it (the change made and the run that then \
passed), and what the user said about it.
## Pending Jobs
Work the user asked for that is not finished: every open or in-progress item of the task \
tracker or todo list with its id and title, and requests the user queued. Mark finished items \
as done rather than listing them as pending.
## Current Work
What was being done right before this checkpoint, and whether it is committed.
## Next Step
One next action, in line with the user's most recent request.
## Critical Context
Commit ids with their messages; the latest test counts with the command that produced them; \
decisions and their reasons; every constraint and preference the user stated or the open \
tasks' specifications require ("must", "never", "don't", "always", "keep", "avoid", "only", \
...), quoted verbatim; open questions; any data needed to continue.

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

SHORTER_FACTOR = 0.4
"""The retry after a truncation asks for at most this many words per token of the cap."""

SHORTER_INSTRUCTION = """

Your previous answer ran past the output limit. Write the whole checkpoint again in at most \
{words} words: keep every section, the exact identifiers, paths, commit ids and open tasks, and \
drop detail first."""
"""Appended to the instruction when a summary hit its output cap; ``{words}`` is the new limit."""


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise MissingExtraError(
            "this needs httpx, which is not installed: pip install 'agentlog[llm]'",
            code="MISSING_EXTRA",
        ) from exc
    return httpx


class OpenAICompatibleSummarizer:
    """Summarize through any OpenAI-compatible ``/chat/completions`` endpoint, streaming.

    The request is the shadowed messages in chat form, then one user message holding
    ``SUMMARY_INSTRUCTION``; the conversation's ``system`` and ``tools`` go along unchanged so
    the provider's prompt cache is reused (S2). The API key is ``api_key``, else read from
    ``api_key_env`` at call time; it is never logged or shown, and without one no Authorization
    header is sent (local servers). ``timeout`` bounds each read of the stream (seconds). When
    a summary runs into its output cap (``max_tokens``), it is asked for once more in at most
    ``SHORTER_FACTOR`` x cap words (``shorten_on_cap``); only a second truncation is an error.
    Transient failures (HTTP 408/409/429/5xx, connection errors) before the stream starts are
    retried ``max_retries`` times, honouring ``Retry-After`` up to ``max_retry_wait`` seconds.
    Cancelling the awaiting task closes the HTTP stream.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        provider: str | None = None,
        max_tokens: int | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        retry_backoff: float = 1.0,
        max_retry_wait: float = 60.0,
        instruction: str = SUMMARY_INSTRUCTION,
        shorten_on_cap: bool = True,
    ) -> None:
        self._httpx = _import_httpx()
        if not base_url or not model:
            raise ValueError("base_url and model must be non-empty")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout}")
        if api_key is not None and (not isinstance(api_key, str) or not api_key.strip()):
            raise ValueError("api_key must be a non-empty string (or None to read api_key_env)")
        self._api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.provider = provider or provider_from_url(base_url)
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.max_retry_wait = max_retry_wait
        self.instruction = instruction
        self.shorten_on_cap = shorten_on_cap

    def __repr__(self) -> str:
        return (f"OpenAICompatibleSummarizer(base_url={self.base_url!r}, model={self.model!r}, "
                f"provider={self.provider!r})")

    def cap(self, request: SummaryRequest) -> int:
        """The ``max_tokens`` sent: the constructor's, else the request's, else 8192."""
        return self.max_tokens or request.max_tokens or 8192

    def build_body(self, request: SummaryRequest, *, shorter: bool = False) -> dict[str, Any]:
        """The chat-completions request body for a summary request (S2); ``shorter`` asks for a
        checkpoint of at most ``SHORTER_FACTOR`` x cap words (the retry after a truncation)."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend(to_openai_messages(request.messages, session_id=request.session_id))
        instruction = self.instruction
        if shorter:
            instruction += SHORTER_INSTRUCTION.format(words=self.shorter_words(request))
        messages.append({"role": "user", "content": instruction})
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.tools:
            body["tools"] = to_openai_tools(request.tools)
        body["max_tokens"] = self.cap(request)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        return body

    def shorter_words(self, request: SummaryRequest) -> int:
        """The word limit of the retry after a truncated summary."""
        return max(50, int(self.cap(request) * SHORTER_FACTOR))

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Stream one summary (a shorter one if it hit the cap); raise ``SummarizerError`` on any
        failure (S4)."""
        stream = await self._complete(self.build_body(request), request.session_id)
        shortened = False
        if stream.finish == "length" and self.shorten_on_cap:
            stream = await self._complete(self.build_body(request, shorter=True), request.session_id)
            shortened = True
        return self._result(stream, request, shortened=shortened)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        key = self._api_key or (os.environ.get(self.api_key_env) if self.api_key_env else None)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def _complete(self, body: dict[str, Any], session_id: str | None) -> CompletionStream:
        """One streamed completion, retrying transient failures before the stream starts."""
        payload = dumps(body)
        headers = self._headers()
        httpx = self._httpx
        timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, 30.0))
        attempt = 0
        async with httpx.AsyncClient(timeout=timeout) as client:
            while True:
                try:
                    return await self._attempt(client, payload, headers, session_id)
                except SummarizerError as exc:
                    delay = self._retry_delay(exc, attempt)
                    if delay is None:
                        raise
                attempt += 1
                await asyncio.sleep(delay)

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
    ) -> CompletionStream:
        httpx = self._httpx
        url = f"{self.base_url}/chat/completions"
        try:
            async with client.stream("POST", url, content=payload, headers=headers) as response:
                if response.status_code >= 400:
                    body = await response.aread()
                    raise http_error(response.status_code, body, response.headers, session_id)
                return await self._read(response, session_id)
        except httpx.TimeoutException as exc:
            raise SummarizerError(f"summarization request timed out after {self.timeout}s ({exc!r})",
                                  code="TIMEOUT", retryable=True, session_id=session_id) from exc
        except httpx.TransportError as exc:
            raise SummarizerError(f"summarization request to {url} failed: {exc!r}",
                                  code="NETWORK", retryable=True, session_id=session_id) from exc

    async def _read(self, response: httpx.Response, session_id: str | None) -> CompletionStream:
        stream = CompletionStream()
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

    def _result(self, stream: CompletionStream, request: SummaryRequest, *, shortened: bool) -> SummaryResult:
        sid = request.session_id
        cap = self.cap(request)
        if stream.finish is None:
            raise SummarizerError("stream ended before a finish reason (incomplete summary)",
                                  code="PROVIDER_ERROR", session_id=sid)
        if stream.finish == "length":
            again = (f", also when asked for at most {self.shorter_words(request)} words"
                     if shortened else "")
            raise SummarizerError(f"summary truncated at max_tokens={cap}{again} (incomplete checkpoint)",
                                  code="MAX_TOKENS", session_id=sid)
        if stream.finish not in ("stop", "tool_calls", "function_call", "eos", "end_turn"):
            code = "CONTENT_FILTER" if stream.finish == "content_filter" else "PROVIDER_ERROR"
            raise SummarizerError(f"summarization finished with reason {stream.finish!r}",
                                  code=code, session_id=sid)
        if not stream.text.strip():
            raise SummarizerError("no text summary content", code="EMPTY_SUMMARY", session_id=sid)
        raw = tuple(freeze(block, root="rawOutput") for block in stream.blocks())
        usage = usage_from_openai(stream.usage)
        return SummaryResult(
            summary=(freeze({"type": "text", "text": stream.text}, root="summary"),),
            provider=self.provider,
            model=self.model,
            max_tokens=cap,
            usage=freeze(usage, root="usage") if usage is not None else None,
            raw_output=raw,
        )

