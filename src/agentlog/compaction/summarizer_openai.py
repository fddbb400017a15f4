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
from agentlog.errors import SummarizerError
from agentlog.jsonvalue import dumps, freeze
from agentlog.openai_wire import (
    CompletionStream,
    http_error,
    import_httpx,
    provider_from_url,
    to_openai_messages,
    to_openai_tools,
    usage_from_openai,
)

if TYPE_CHECKING:
    import httpx

__all__ = ["SUMMARY_INSTRUCTION", "OpenAICompatibleSummarizer"]

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
        self._httpx = import_httpx()
        if not base_url or not model:
            raise ValueError("base_url and model must be non-empty")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
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

    def _result(self, stream: CompletionStream, request: SummaryRequest) -> SummaryResult:
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
        usage = usage_from_openai(stream.usage)
        return SummaryResult(
            summary=(freeze({"type": "text", "text": stream.text}, root="summary"),),
            provider=self.provider,
            model=self.model,
            max_tokens=cap,
            usage=freeze(usage, root="usage") if usage is not None else None,
            raw_output=raw,
        )

