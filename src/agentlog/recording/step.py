"""Step: one model call and its tool runs; assembles the assistant message from its stream chunks
(spec session-core §7, §11)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Protocol

from agentlog.core.aio import run, running_loop
from agentlog.core.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
    is_safe_int,
)
from agentlog.core.jsonvalue import FrozenDict, freeze, frozen_dict, frozen_object, valid_text
from agentlog.core.repair import (
    NOT_STARTED_TEXT,
    OUTCOME_UNKNOWN_TEXT,
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
)
from agentlog.core.request_header import canonical_header, check_request_header_shape, header_equals
from agentlog.core.session import Session
from agentlog.errors import InvalidEventError, UsageError
from agentlog.recording.values import (
    CLOSED,
    NEW,
    OPEN,
    check_text,
    check_usage,
    contain,
    content_blocks,
    is_abort,
    located,
    new_message_id,
    user_message_data,
)

__all__ = ["Step", "StepRecorder", "StepTurn"]


class StepRecorder(Protocol):
    """What a step uses of its ``Recorder``: the compactor's hooks, the flushes, request state."""

    _requested: bool
    _overflows: int

    def _hook(self, name: str) -> Any: ...
    def _pre_step(self) -> None: ...
    def _check_sync_flush(self) -> None: ...
    def _flush_sync(self) -> None: ...
    async def _flush_async(self) -> None: ...


class StepTurn(Protocol):
    """What a step reads and moves of its ``Turn`` (``agentlog.recording.recorder.Turn``)."""

    _step: Step | None
    _steps: int
    _truncated: bool

    @property
    def _recorder(self) -> StepRecorder: ...
    @property
    def _session(self) -> Session: ...
    @property
    def number(self) -> int: ...
    @property
    def is_open(self) -> bool: ...
    def _require_open(self, what: str) -> None: ...
    def todo_write(self, todos: Sequence[Mapping[str, Any]]) -> Event: ...

_OUTCOME_UNKNOWN_ERROR: Final = frozen_dict({"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN})
_NOT_STARTED_ERROR: Final = frozen_dict({"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED})
_DELTA_KINDS: Final = {"text-delta": "text", "reasoning-delta": "reasoning", "tool-call-delta": "tool-call"}


class Step:
    """One model call and the tool runs it asked for: ``step/start`` ... ``step/end``."""

    __slots__ = ("_answered", "_blocks", "_calls", "_chunk_seqs", "_last_index", "_last_kind", "_message",
                 "_number", "_recorder", "_session", "_state", "_streaming", "_tool_blocks", "_turn",
                 "_turn_number", "_usage")

    def __init__(self, turn: StepTurn) -> None:
        self._turn = turn
        self._recorder = turn._recorder
        self._session = turn._session
        self._turn_number = turn.number
        self._number = 0
        self._state = NEW
        self._streaming = False  # open and no assistant/message yet: deltas allowed
        self._chunk_seqs: list[int] = []
        self._blocks: dict[int, list[Any]] = {}  # index -> [kind, parts, call id, name]
        self._tool_blocks: dict[str, int] = {}  # streamed call id -> block index
        self._last_kind = ""
        self._last_index = -1
        self._usage: Any = None
        self._message: Event | None = None
        self._calls: dict[str, int | None] = {}  # unresolved call id -> tool/call seq (None: not logged)
        self._answered: set[str] = set()

    @property
    def number(self) -> int:
        """The step number within its turn (0 until started)."""
        return self._number

    @property
    def turn(self) -> StepTurn:
        return self._turn

    @property
    def session(self) -> Session:
        """The session this step logs into."""
        return self._session

    @property
    def message(self) -> Event | None:
        """The step's ``assistant/message`` event, once logged."""
        return self._message

    def start(self) -> Step:
        """Run the compactor's pre-step check (if any), then log ``step/start``."""
        self._check_startable()
        self._recorder._pre_step()
        return self._start()

    @located(STEP_START)
    def _check_startable(self) -> None:
        turn = self._turn
        if self._state != NEW:
            raise UsageError("this step was already started; call turn.step() for a new one")
        turn._require_open("step")
        if turn._step is not None:
            raise UsageError(f"step {turn._step.number} of turn {turn.number} is still open; end it first",
                             session_id=self._session.id)

    def _start(self) -> Step:
        self._check_startable()
        turn = self._turn
        number = turn._steps + 1
        self._session.append(STEP_START, frozen_dict({"turn": self._turn_number, "step": number}))
        self._number = number
        turn._steps = number
        turn._step = self
        self._state = OPEN
        self._streaming = True
        return self

    def __enter__(self) -> Step:
        return self.start()

    async def __aenter__(self) -> Step:
        self._check_startable()
        hook = self._recorder._hook("abefore_step")
        if hook is not None:
            await hook(self._session)
        return self._start()

    def on_request_error(self, error: BaseException) -> bool:
        """Context-overflow recovery for a failed model request of this step (blocking form).

        Returns True when the compactor replaced part of the surface: rebuild the request from
        ``session.derive_messages()`` and stream again in this same step. False: raise ``error``.
        """
        if running_loop() is None:
            return run(self.aon_request_error(error))
        raise UsageError("step.on_request_error() cannot block inside a running event loop; "
                         "use `await step.aon_request_error(exc)`", session_id=self._session.id)

    async def aon_request_error(self, error: BaseException) -> bool:
        """``on_request_error`` for async loops; the compactor caps retries per successful response."""
        self._require_open("on_request_error")
        if self._message is not None:
            raise UsageError("step.on_request_error() after this step's assistant/message",
                             session_id=self._session.id)
        recorder = self._recorder
        hook = recorder._hook("arecover_overflow")
        if hook is None:
            return False
        retry: bool = await hook(self._session, error, attempts=recorder._overflows)
        if retry:
            recorder._overflows += 1
            self._chunk_seqs = []
            self._blocks = {}
            self._tool_blocks = {}
            self._last_kind, self._last_index = "", -1
            self._usage = None
        return retry

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._state != OPEN:
            return
        if exc is None:
            self.end()
            return
        try:
            self._close_abnormally(abort=is_abort(exc) or not isinstance(exc, Exception))
        except Exception as failure:
            self._state = CLOSED
            self._streaming = False
            self._turn._step = None
            contain(exc, f"the end of step {self._number}", failure)

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(exc_type, exc, tb)

    @located(STEP_END)
    def end(self) -> Event:
        """Log ``step/end``; tool calls still unanswered stay so (the invariants allow it)."""
        self._require_open("end")
        event = self._session.append(STEP_END, frozen_dict({"turn": self._turn_number, "step": self._number}))
        self._state = CLOSED
        self._streaming = False
        self._turn._step = None
        return event

    def max_tokens(self) -> None:
        """This step was truncated: the whole turn ends ``max-tokens`` (sticky)."""
        self._turn._truncated = True

    # -- messages and request state ------------------------------------------------------

    @located(USER_MESSAGE)
    def user_message(self, content: str | Sequence[Any], *, source: Mapping[str, Any] | None = None,
                     id: str | None = None) -> Event:
        """Log a ``user/message`` (surface append); DSH's loop writes the prompt inside step 1."""
        self._require_open("user_message")
        return self._session.append(USER_MESSAGE, user_message_data(content, source, id), surface_op="append")

    def todo_write(self, todos: Sequence[Mapping[str, Any]]) -> Event:
        """Log the whole todo list (``todo/write``)."""
        return self._turn.todo_write(todos)

    def request_header(self, header: Mapping[str, Any], *,
                       context: Mapping[str, Any] | None = None) -> Event | None:
        """Log the request header if it is new to the log (initial/resume/change), then checkpoint.

        ``context`` ``{provider, model, contextWindow?}`` is logged as ``request/context`` when it
        differs from the log's latest. Returns the ``request/header`` event, or None if unchanged.
        """
        self._recorder._check_sync_flush()
        event = self._log_request(header, context)
        self._recorder._flush_sync()
        return event

    async def arequest_header(self, header: Mapping[str, Any], *,
                              context: Mapping[str, Any] | None = None) -> Event | None:
        """``request_header`` whose checkpoint awaits an async ``flush``."""
        event = self._log_request(header, context)
        await self._recorder._flush_async()
        return event

    @located(REQUEST_CONTEXT)
    def _request_context(self, context: Mapping[str, Any]) -> FrozenDict:
        """``{provider, model, contextWindow?}`` validated and frozen (refusals name request/context)."""
        ctx = frozen_object(context, "data")
        for key in ("provider", "model"):
            if type(ctx.get(key)) is not str or not ctx[key]:
                raise InvalidEventError(f"request/context lacks {key}", path=f"data.{key}")
        window = ctx.get("contextWindow", 1)
        if not (is_safe_int(window) and window > 0):
            raise InvalidEventError("request/context contextWindow must be a positive integer",
                                    path="data.contextWindow")
        return ctx

    @located(REQUEST_HEADER)
    def _log_request(self, header: Mapping[str, Any], context: Mapping[str, Any] | None) -> Event | None:
        self._require_open("request_header")
        frozen = frozen_object(header, "data.header")
        check_request_header_shape({"header": frozen}, "request/header")
        ctx = None if context is None else self._request_context(context)
        session, recorder = self._session, self._recorder
        previous = session.request_header()
        if previous is None:
            reason: str | None = "initial"
        elif not recorder._requested:
            reason = "resume"
        else:
            reason = None if header_equals(previous, canonical_header(frozen)) else "change"
        recorder._requested = True
        event = None
        if reason is not None:
            event = session.append(REQUEST_HEADER, frozen_dict({"header": frozen, "reason": reason}))
        if ctx is not None and session.request_context() != ctx:
            session.append(REQUEST_CONTEXT, ctx)
        return event

    # -- the model's stream --------------------------------------------------------------

    def text_delta(self, text: str) -> int:
        """Log a ``text-delta`` chunk and return its seq; consecutive text deltas share one text
        block. The chunk stays packed until read (``session.events[seq]`` gives its event)."""
        return self._text_chunk(text, "text", "text-delta", "text_delta")

    def reasoning_delta(self, text: str) -> int:
        """Log a ``reasoning-delta`` chunk and return its seq; consecutive reasoning deltas share
        one block."""
        return self._text_chunk(text, "reasoning", "reasoning-delta", "reasoning_delta")

    def _text_chunk(self, text: str, block: str, chunk_type: str, method: str) -> int:
        """The hot path of both text-like deltas (one call per streamed chunk): a string check
        and an append to the session's open packed run."""
        if not self._streaming:
            self._refuse_chunk(method)
        if type(text) is not str or not (text.isascii() or valid_text(text)):
            self._refuse_text(text, method)
        index = self._last_index if self._last_kind == block else self._open_block(block, None, None)
        seq = self._session._append_delta(self._turn_number, self._number, chunk_type, index, text)
        self._blocks[index][1].append(text)
        self._chunk_seqs.append(seq)
        return seq

    @located(ASSISTANT_CHUNK)
    def tool_call_delta(self, id: str, name: str | None, args_delta: str) -> int:
        """Log a ``tool-call-delta`` chunk and return its seq; deltas with the same call id build
        one tool-call block. The chunk stays packed until read, like a text delta's."""
        if not self._streaming:
            self._refuse_chunk("tool_call_delta")
        check_text(id, "tool call id", path="data.chunk.id", empty=False)
        check_text(args_delta, "tool call arguments delta", path="data.chunk.argumentsDelta")
        if name is not None:
            check_text(name, "tool name", path="data.chunk.name", empty=False)
        index = self._tool_blocks.get(id)
        if index is None:
            index = self._open_block("tool-call", id, None)
            self._tool_blocks[id] = index
        seq = self._session._append_delta(self._turn_number, self._number, "tool-call-delta", index,
                                          args_delta, id, name)
        block = self._blocks[index]
        if name is not None:
            block[3] = name
        block[1].append(args_delta)
        self._last_kind, self._last_index = "tool-call", index
        self._chunk_seqs.append(seq)
        return seq

    @located(ASSISTANT_CHUNK)
    def chunk(self, chunk: Mapping[str, Any]) -> Event:
        """Log any StreamChunk as given; deltas feed the assembled message, ``usage`` its usage,
        and a ``finish`` for max-tokens marks the turn truncated."""
        if not self._streaming:
            self._refuse_chunk("chunk")
        frozen = frozen_object(chunk, "data.chunk")
        kind, index = frozen.get("type"), frozen.get("index")
        if type(kind) is not str:
            raise InvalidEventError("stream chunk needs a string type", path="data.chunk.type")
        if kind in _DELTA_KINDS and type(index) is int and index >= 0:
            self._feed(_DELTA_KINDS[kind], index, frozen)
        elif kind == "usage":
            self._usage = frozen.get("usage")
        elif kind == "finish":
            reason = frozen.get("reason")
            if isinstance(reason, dict) and reason.get("kind") == "max-tokens":
                self._turn._truncated = True
        return self._chunk(frozen)

    def _feed(self, kind: str, index: int, chunk: FrozenDict) -> None:
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = [kind, [], chunk.get("id"), None]
        text = chunk.get("argumentsDelta" if kind == "tool-call" else "text")
        if type(text) is str:
            block[1].append(text)
        if kind == "tool-call" and type(chunk.get("name")) is str:
            block[3] = chunk["name"]
        self._last_kind, self._last_index = kind, index

    def _open_block(self, kind: str, call_id: str | None, name: str | None) -> int:
        index = max(self._blocks) + 1 if self._blocks else 0
        self._blocks[index] = [kind, [], call_id, name]
        self._last_kind, self._last_index = kind, index
        return index

    def _chunk(self, chunk: FrozenDict) -> Event:
        event = self._session.append(
            ASSISTANT_CHUNK, frozen_dict({"turn": self._turn_number, "step": self._number, "chunk": chunk})
        )
        self._chunk_seqs.append(event.seq)
        return event

    @located(ASSISTANT_CHUNK)
    def _refuse_text(self, text: object, method: str) -> None:
        """The refusal of a text delta that is not valid text (off the hot path)."""
        check_text(text, method.replace("_", " "), path="data.chunk.text")

    @located(ASSISTANT_CHUNK)
    def _refuse_chunk(self, what: str) -> None:
        self._require_open(what)
        raise UsageError(f"step.{what}() after this step's assistant/message", session_id=self._session.id)

    # -- the model's message -------------------------------------------------------------

    @located(ASSISTANT_MESSAGE)
    def assistant(self, *, provider: str | None = None, model: str | None = None, usage: Any = None,
                  content: Sequence[Any] | None = None, interrupted: bool = False,
                  id: str | None = None,
                  replay_state: Any = None) -> Event:
        """Log the step's ``assistant/message`` citing its chunks in ``sourceEventSeqs``.

        The content is assembled from the deltas (blocks in index order) unless ``content`` is
        given; ``provider``/``model`` default to the latest request header's config.
        """
        self._require_open("assistant")
        if self._message is not None:
            raise UsageError(f"step {self._number} already has its assistant/message",
                             session_id=self._session.id)
        blocks = (self._assembled(interrupted) if content is None
                  else content_blocks(content, "data.message.content"))
        source = self._model_source(provider, model, replay_state)
        message = frozen_dict({"id": new_message_id(id, "data.message.id"), "role": "assistant",
                               "content": blocks, "source": source})
        data: dict[str, Any] = {"turn": self._turn_number, "step": self._number, "message": message}
        usage = self._usage if usage is None else check_usage(usage)
        if usage is not None:
            data["usage"] = usage
        if interrupted:
            data["interrupted"] = True
        event = self._session.append(ASSISTANT_MESSAGE, frozen_dict(data), surface_op="append",
                                     source_event_seqs=tuple(self._chunk_seqs))
        self._message = event
        self._streaming = False
        self._recorder._overflows = 0
        for block in blocks:
            if block.get("type") == "tool-call" and type(block.get("id")) is str:
                self._calls.setdefault(block["id"], None)
        return event

    def _assembled(self, interrupted: bool) -> tuple[Any, ...]:
        blocks: list[Any] = []
        for index in sorted(self._blocks):
            kind, parts, call_id, name = self._blocks[index]
            if kind != "tool-call":
                blocks.append(frozen_dict({"type": kind, "text": "".join(parts)}))
            elif not interrupted:  # an interrupted prefix omits calls that were never dispatched
                if type(call_id) is not str or type(name) is not str:
                    raise InvalidEventError(f"streamed tool call at index {index} lacks an id or a name")
                blocks.append(frozen_dict({"type": "tool-call", "id": call_id, "name": name,
                                           "arguments": "".join(parts)}))
        return tuple(blocks)

    def _model_source(self, provider: str | None, model: str | None, replay_state: Any) -> FrozenDict:
        if provider is None or model is None:
            header = self._session.request_header()
            config = header.get("config") if header is not None else None
            if not isinstance(config, dict):
                raise UsageError("assistant() needs provider and model (no request header logged yet)",
                                 session_id=self._session.id)
            provider = config.get("provider") if provider is None else provider
            model = config.get("model") if model is None else model
        source: dict[str, Any] = {
            "kind": "model",
            "provider": check_text(provider, "provider", path="data.message.source.provider", empty=False),
            "model": check_text(model, "model", path="data.message.source.model", empty=False),
        }
        if replay_state is not None:
            source["replayState"] = freeze(replay_state, root="data.message.source.replayState")
        return frozen_dict(source)

    # -- tools ---------------------------------------------------------------------------

    def tool_call(self, call_id: str, name: str, arguments: str) -> Event:
        """Log ``tool/call`` (the tool is about to run), then checkpoint before it runs."""
        self._recorder._check_sync_flush()
        event = self._log_call(call_id, name, arguments)
        self._recorder._flush_sync()
        return event

    async def atool_call(self, call_id: str, name: str, arguments: str) -> Event:
        """``tool_call`` whose checkpoint awaits an async ``flush``."""
        event = self._log_call(call_id, name, arguments)
        await self._recorder._flush_async()
        return event

    @located(TOOL_CALL)
    def _log_call(self, call_id: str, name: str, arguments: str) -> Event:
        self._require_open("tool_call")
        if self._message is None:  # DSH order: the model asks for the call, then the tool runs (§1)
            raise UsageError("step.tool_call() before this step's assistant/message: log the model's "
                             "message (step.assistant()) first", session_id=self._session.id,
                             seq=self._session.seq, event_type=TOOL_CALL)
        check_text(call_id, "tool call id", path="data.callId", empty=False)
        check_text(name, "tool name", path="data.name", empty=False)
        check_text(arguments, "tool arguments", path="data.arguments")
        if self._calls.get(call_id) is not None or call_id in self._answered:
            raise UsageError(f"tool call {call_id!r} was already logged in this step",
                             session_id=self._session.id)
        event = self._session.append(TOOL_CALL, frozen_dict({
            "turn": self._turn_number, "step": self._number, "callId": call_id, "name": name,
            "arguments": arguments,
        }))
        self._calls[call_id] = event.seq
        return event

    @located(TOOL_RESULT)
    def tool_result(self, call_id: str, content: str | Sequence[Any], *, is_error: bool = False,
                    error: Mapping[str, Any] | None = None, meta: Any = None,
                    id: str | None = None) -> Event:
        """Log the model-facing ``tool/result`` (surface append) citing its ``tool/call``.

        ``error`` ``{name, code}`` is the internal failure identity, ``meta`` a tool-private
        JSON payload. A result needs a prior ``tool_call`` in this step unless it is a
        not-started error (``is_error`` with code ``TOOL_NOT_STARTED``).
        """
        self._require_open("tool_result")
        check_text(call_id, "tool call id", path="data.message.source.callId", empty=False)
        if type(is_error) is not bool:
            raise InvalidEventError(f"is_error must be a bool, got {type(is_error).__name__}")
        frozen_error = None if error is None else frozen_object(error, "data.error")
        call_seq = self._calls.get(call_id)
        not_started = is_error and frozen_error is not None and frozen_error.get("code") == TOOL_NOT_STARTED
        if call_id in self._answered:
            raise UsageError(f"tool call {call_id!r} already has its tool/result",
                             session_id=self._session.id)
        if call_seq is None and not not_started:
            raise UsageError(f"no prior tool/call in this step for call id {call_id!r}; call "
                             "step.tool_call() before the tool runs", session_id=self._session.id)
        block = frozen_dict({"type": "tool-result", "toolCallId": call_id,
                             "content": content_blocks(content, "data.message.content[0].content"),
                             "isError": is_error})
        message = frozen_dict({"id": new_message_id(id, "data.message.id"), "role": "user",
                               "content": (block,),
                               "source": frozen_dict({"kind": "tool", "callId": call_id})})
        data: dict[str, Any] = {"turn": self._turn_number, "step": self._number, "message": message}
        if frozen_error is not None:
            data["error"] = frozen_error
        if meta is not None:
            data["meta"] = freeze(meta, root="data.meta", what="non-JSON-serializable data")
        event = self._session.append(TOOL_RESULT, frozen_dict(data), surface_op="append",
                                     source_event_seqs=None if call_seq is None else (call_seq,))
        self._calls.pop(call_id, None)
        self._answered.add(call_id)
        return event

    # -- closing on failure --------------------------------------------------------------

    def _close_abnormally(self, *, abort: bool) -> None:
        """Finish a step cut short: keep an aborted stream's prefix, answer unanswered calls, end it."""
        if abort and self._message is None and self._chunk_seqs and (
            self._session.request_header() is not None
        ):
            self.assistant(interrupted=True)
        for call_id, call_seq in list(self._calls.items()):
            started = call_seq is not None
            self.tool_result(
                call_id, OUTCOME_UNKNOWN_TEXT if started else NOT_STARTED_TEXT, is_error=True,
                error=_OUTCOME_UNKNOWN_ERROR if started else _NOT_STARTED_ERROR,
            )
        self.end()

    def _require_open(self, what: str) -> None:
        if self._state != OPEN:
            state = "has not started" if self._state == NEW else "has ended"
            raise UsageError(f"step.{what}() needs an open step, but this step {state}",
                             session_id=self._session.id)

