"""Token estimation: DSH's fixed heuristic and the per-session meter fold (spec compaction §6).

Lengths are UTF-16 code units (JavaScript's ``.length``), divided by 4 and rounded up, plus
fixed overheads per block and per message. ``TokenMeter.measure(session)`` folds each
session's log once, remembering where it stopped, so a call costs O(new events); usage
reported by the provider anchors the total (K3, K4). ``counter=`` swaps the ``ceil(len/4)``
text estimate for an exact tokenizer while keeping the overheads.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, overload

from agentlog.compaction.events import COMPACTION_PRUNE, COMPACTION_SUMMARY
from agentlog.core.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    Event,
    Replace,
)
from agentlog.core.jsonvalue import dumps
from agentlog.core.messages import derive_event_message
from agentlog.core.request_header import canonical_header, event_header, header_equals
from agentlog.errors import InvalidEventError, InvariantError, SurfaceError

if TYPE_CHECKING:
    from agentlog.core.session import Session

__all__ = [
    "Anchor",
    "ContextBreakdown",
    "ContextPressure",
    "Measurement",
    "NodePrice",
    "NodePrices",
    "Pricer",
    "TokenMeter",
    "session_log",
    "utf16_len",
]

BLOCK_OVERHEAD: Final = 4
MESSAGE_OVERHEAD: Final = 4

Baseline = Literal["none", "estimated", "usage"]
TextCounter = Callable[[str], int]


def utf16_len(text: str) -> int:
    """JavaScript's ``text.length``: UTF-16 code units (astral characters count twice)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def _ceil4(units: int) -> int:
    return -(-units // 4)


def _json_text(value: Any) -> str:
    return dumps(value).decode()


class Pricer:
    """Prices text, blocks, messages and request envelopes (K1)."""

    __slots__ = ("_counter",)

    def __init__(self, counter: TextCounter | None = None) -> None:
        self._counter = counter

    def text(self, text: str) -> int:
        """Tokens of a bare string: ``ceil(utf16 length / 4)``, or the exact counter's figure."""
        if self._counter is not None:
            return int(self._counter(text))
        return _ceil4(utf16_len(text))

    def block(self, block: Any) -> int:
        """One content block with its overhead; unknown types are priced by their JSON."""
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in ("text", "reasoning") and type(block.get("text")) is str:
            return self.text(block["text"]) + BLOCK_OVERHEAD
        if kind == "tool-call":
            name, arguments = block.get("name"), block.get("arguments")
            return (self.text(name if type(name) is str else _json_text(name))
                    + self.text(arguments if type(arguments) is str else _json_text(arguments))
                    + BLOCK_OVERHEAD)
        if kind == "tool-result":
            inner = block.get("content")
            return self.content(inner if isinstance(inner, (list, tuple)) else ()) + BLOCK_OVERHEAD
        return BLOCK_OVERHEAD + self.text(_json_text(block))

    def content(self, blocks: Sequence[Any]) -> int:
        return sum(self.block(block) for block in blocks)

    def message(self, message: Any) -> int:
        """A message: its content plus the role overhead (``estimateMessage``)."""
        content = message.get("content") if isinstance(message, dict) else None
        return self.content(content if isinstance(content, (list, tuple)) else ()) + MESSAGE_OVERHEAD

    def event(self, event: Event) -> int:
        """A surface event's price: its derived message, or 0 when it derives none."""
        message = derive_event_message(event)
        return 0 if message is None else self.message(message)

    def system(self, header: Any) -> int:
        system = header.get("system") if header is not None else None
        return self.text(system) + BLOCK_OVERHEAD if type(system) is str and system else 0

    def tools(self, header: Any) -> int:
        tools = header.get("tools") if header is not None else None
        return self.text(_json_text(tools)) + BLOCK_OVERHEAD if tools else 0

    def header(self, header: Any) -> int:
        """A canonical request header: system prompt and tool schemas (config is free)."""
        return self.system(header) + self.tools(header)


class NodePrice(NamedTuple):
    """One surface node and its price."""

    seq: int
    tokens: int


class _Prefix(Sequence[int]):
    """The first ``length`` items of a list that is only ever appended to (a detached view)."""

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[int], length: int) -> None:
        self._items = items
        self._length = length

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return self._items[: self._length][index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("index out of range")
        return self._items[index]

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[int]:
        items = self._items
        for index in range(self._length):
            yield items[index]

    def slice(self, start: int, stop: int) -> list[int]:
        """``self[start:stop]`` without copying the prefix first."""
        return self._items[max(0, start) : min(stop, self._length)]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Prefix):
            if other._length != self._length:
                return False
            if other._items is self._items:
                return True
            return self._items[: self._length] == other._items[: other._length]
        if isinstance(other, (list, tuple)):
            return len(other) == self._length and list(other) == self._items[: self._length]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._items[: self._length])


class NodePrices(Sequence[NodePrice]):
    """The priced surface in surface order: ``seqs`` and ``prices`` views, O(1) to take."""

    __slots__ = ("prices", "seqs")

    def __init__(self, seqs: _Prefix, prices: _Prefix) -> None:
        self.seqs = seqs
        self.prices = prices

    @overload
    def __getitem__(self, index: int) -> NodePrice: ...
    @overload
    def __getitem__(self, index: slice) -> list[NodePrice]: ...
    def __getitem__(self, index: int | slice) -> NodePrice | list[NodePrice]:
        if isinstance(index, slice):
            return [NodePrice(s, p) for s, p in zip(self.seqs[index], self.prices[index], strict=True)]
        return NodePrice(self.seqs[index], self.prices[index])

    def __len__(self) -> int:
        return len(self.seqs)

    def __iter__(self) -> Iterator[NodePrice]:
        for seq, tokens in zip(self.seqs, self.prices, strict=True):
            yield NodePrice(seq, tokens)

    def __eq__(self, other: object) -> bool:
        """The ``{seq, tokens}`` vectors are equal (T10's whole-surface check)."""
        if isinstance(other, NodePrices):
            return self.seqs == other.seqs and self.prices == other.prices
        if isinstance(other, (list, tuple)):
            return list(self) == [tuple(item) for item in other]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"NodePrices({len(self)} nodes)"


@dataclass(frozen=True, slots=True)
class Anchor:
    """The pressure sample of the latest ``assistant/message`` (K3)."""

    seq: int
    header: Any
    surface_tokens: int
    tokens: int
    baseline: Baseline


@dataclass(frozen=True, slots=True)
class Measurement:
    """One meter snapshot (K4): pressure figures plus the priced surface, detached and frozen.

    ``total_tokens`` = max(0, baseline + delta) is what compaction compares to the threshold.
    """

    baseline: Baseline
    baseline_tokens: int
    delta_tokens: int
    total_tokens: int
    log_revision: int
    surface_tokens: int
    header_tokens: int
    nodes: NodePrices


@dataclass(frozen=True, slots=True)
class ContextPressure:
    """Display-only projection (K5): last prompt-side usage and its projection to now."""

    pressure_tokens: int | None
    projected_tokens: int | None


@dataclass(frozen=True, slots=True)
class ContextBreakdown:
    """Display-only split of the request: system prompt, tool schemas, messages."""

    system_tokens: int
    tools_tokens: int
    message_tokens: int


class _Fold:
    """The meter's state for one session: consumed events, priced surface, step, anchor."""

    __slots__ = ("anchor", "consumed", "header", "header_tokens", "prices", "seqs", "step", "total")

    def __init__(self) -> None:
        self.consumed = 0
        self.seqs: list[int] = []
        self.prices: list[int] = []
        self.total = 0
        self.header: Any = None
        self.header_tokens = 0
        self.step: tuple[Any, Any, int] | None = None
        self.anchor: Anchor | None = None


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _count(usage: Any, key: str) -> int:
    value = usage.get(key)
    return value if type(value) is int and value > 0 else 0


class _Projection:
    """K5's O(1) fold: surface total moved only by appends and by shadow-priced replaces."""

    __slots__ = ("consumed", "pending", "sample", "surface")

    def __init__(self) -> None:
        self.consumed = 0
        self.surface = 0
        self.pending: tuple[tuple[int, ...], int, int] | None = None  # seqs, tokens, price seq
        self.sample: tuple[int, int] | None = None  # prompt-side usage, surface at the sample


class TokenMeter:
    """Measures sessions with DSH's heuristic; one incremental fold per session (weakly held)."""

    __slots__ = ("_folds", "_projections", "pricer")

    def __init__(self, counter: TextCounter | None = None) -> None:
        self.pricer = Pricer(counter)
        self._folds: weakref.WeakKeyDictionary[Session, _Fold] = weakref.WeakKeyDictionary()
        self._projections: weakref.WeakKeyDictionary[Session, _Projection] = weakref.WeakKeyDictionary()

    # -- pricing helpers ---------------------------------------------------------------------

    def estimate_message(self, message: Any) -> int:
        """``estimateMessage``: content blocks plus the role overhead."""
        return self.pricer.message(message)

    def estimate_event(self, event: Event) -> int:
        """The price of one surface event (0 when it derives no message)."""
        return self.pricer.event(event)

    def estimate_header(self, header: Any) -> int:
        """The price of a request header's envelope (system prompt and tools)."""
        return 0 if header is None else self.pricer.header(canonical_header(header))

    # -- the fold ------------------------------------------------------------------------------

    def measure(self, session: Session, header_override: Any = None) -> Measurement:
        """Fold the new events of ``session`` and return its pressure and priced surface (K4).

        ``header_override`` (a request header) changes only the pressure figures.
        """
        fold = self._fold(session)
        effective = fold.header if header_override is None else canonical_header(header_override)
        header_tokens = fold.header_tokens if header_override is None else self.pricer.header(effective)
        nodes = NodePrices(_Prefix(fold.seqs, len(fold.seqs)), _Prefix(fold.prices, len(fold.prices)))
        anchor = fold.anchor
        baseline: Baseline
        if anchor is not None and _same_header(anchor.header, effective):
            baseline, base, delta = anchor.baseline, anchor.tokens, fold.total - anchor.surface_tokens
        elif effective is None and not fold.seqs:
            baseline, base, delta = "none", 0, 0
        else:
            baseline, base, delta = "estimated", header_tokens + fold.total, 0
        return Measurement(baseline, base, delta, max(0, base + delta), fold.consumed, fold.total,
                           header_tokens, nodes)

    def _fold(self, session: Session) -> _Fold:
        fold = self._folds.get(session)
        if fold is None:
            fold = self._folds[session] = _Fold()
        events = session.events
        count = len(events)
        if fold.consumed < count:
            log = session_log(session)
            for index in range(fold.consumed, count):
                event = log[index]
                if event[4] is not None or event[0] in _FOLDED:
                    try:
                        self._apply(fold, event, log)
                    except (InvalidEventError, InvariantError) as exc:
                        raise exc.locate(session_id=session.id, seq=event.seq,
                                         event_type=event.type) from None
                fold.consumed = index + 1
        return fold

    def _apply(self, fold: _Fold, event: Event, log: Sequence[Event]) -> None:
        """Fold one event; every check comes before the first change (a failure leaves no trace)."""
        kind = event[0]
        if kind == REQUEST_HEADER:
            header = event_header(event)
            if header is not None:
                fold.header = canonical_header(header)
                fold.header_tokens = self.pricer.header(fold.header)
            return
        if kind == STEP_START:
            if fold.step is not None:
                raise InvariantError(f"token meter: step/start while step {fold.step[1]} is open")
            fold.step = (_get(event.data, "turn"), _get(event.data, "step"), fold.total)
            return
        if kind == STEP_END:
            self._check_in_step(fold, event, "step/end")
            fold.step = None
            return
        anchor = self._anchor(fold, event, log) if kind == ASSISTANT_MESSAGE else None
        op = event[4]
        if op is not None:
            self._apply_surface(fold, event, op)
        if anchor is not None:
            fold.anchor = anchor

    def _apply_surface(self, fold: _Fold, event: Event, op: Any) -> None:
        price = self.pricer.event(event)
        if not isinstance(op, Replace):
            fold.seqs.append(event.seq)
            fold.prices.append(price)
            fold.total += price
            return
        seqs = fold.seqs
        try:
            start, end = seqs.index(op.start), seqs.index(op.end)
        except ValueError:
            raise SurfaceError(f"token meter: replace {op.start}..{op.end} is not on the priced "
                               "surface") from None
        if start > end:
            raise SurfaceError(f"token meter: replace start seq {op.start} is after end seq {op.end}")
        removed = sum(fold.prices[start : end + 1])
        # Copy on write: earlier measurements keep viewing the lists they were given.
        fold.seqs = [*seqs[:start], event.seq, *seqs[end + 1 :]]
        fold.prices = [*fold.prices[:start], price, *fold.prices[end + 1 :]]
        fold.total += price - removed

    def _check_in_step(self, fold: _Fold, event: Event, what: str) -> None:
        step = fold.step
        data = event.data
        if step is None or step[0] != _get(data, "turn") or step[1] != _get(data, "step"):
            where = "no step is open" if step is None else f"the open step is {step[0]}/{step[1]}"
            raise InvariantError(f"token meter: {what} for turn {_get(data, 'turn')!r} step "
                                 f"{_get(data, 'step')!r}, but {where}")

    def _anchor(self, fold: _Fold, event: Event, log: Sequence[Event]) -> Anchor:
        """K3: surface at step/start + the provider's actual output, then usage or estimate."""
        self._check_in_step(fold, event, "assistant/message")
        assert fold.step is not None
        output = self._output_price(event, log)
        surface = fold.step[2] + output
        estimate = fold.header_tokens + surface
        usage = _get(event.data, "usage")
        if isinstance(usage, dict):
            provider = (_count(usage, "inputTokens") + _count(usage, "cacheReadTokens")
                        + _count(usage, "cacheWriteTokens") + _count(usage, "outputTokens"))
            if provider >= estimate:
                return Anchor(event.seq, fold.header, surface, provider, "usage")
        return Anchor(event.seq, fold.header, surface, estimate, "estimated")

    def _output_price(self, event: Event, log: Sequence[Event]) -> int:
        """The reassembled streamed output cited by ``sourceEventSeqs`` (absent: the message).

        A replacing message (an ``AgentlogSession`` edit) cites the nodes it shadows, as a replace
        must (spec S7), not chunks: its output is the message itself.
        """
        sources = event.source_event_seqs
        if sources is None or isinstance(event.surface_op, Replace):
            return self.pricer.event(event)
        turn, step = _get(event.data, "turn"), _get(event.data, "step")
        blocks: dict[int, list[Any]] = {}
        limit = event.seq
        for seq in sources:
            chunk_event = log[seq] if 0 <= seq < limit else None
            if chunk_event is None or chunk_event[0] != ASSISTANT_CHUNK:
                raise InvalidEventError(f"token meter: assistant/message cites seq {seq}, not an earlier "
                                        "assistant/chunk")
            data = chunk_event[3]
            if not isinstance(data, dict) or data.get("turn") != turn or data.get("step") != step:
                raise InvalidEventError(f"token meter: assistant/message cites chunk {seq} of another step")
            chunk = data.get("chunk")
            if isinstance(chunk, dict) and chunk.get("type") == "text-delta":  # the common case, inlined
                index, text = chunk.get("index"), chunk.get("text")
                if type(index) is int and type(text) is str:
                    block = blocks.get(index)
                    if block is None:
                        block = blocks[index] = ["text", [], None]
                    block[1].append(text)
                    continue
            _reassemble(blocks, chunk)
        if not blocks:
            return 0
        content = [_block(parts) for _, parts in sorted(blocks.items())]
        return self.pricer.message({"content": content})

    # -- projections (display only) ------------------------------------------------------------

    def context_pressure(self, session: Session) -> ContextPressure:
        """The last prompt-side usage and that figure moved by surface changes since (K5)."""
        state = self._projection(session)
        if state.sample is None:
            return ContextPressure(None, None)
        usage, surface = state.sample
        return ContextPressure(usage, max(0, usage + state.surface - surface))

    def context_breakdown(self, session: Session) -> ContextBreakdown:
        """System prompt, tool schemas and messages of the current request, in tokens."""
        fold = self._fold(session)
        return ContextBreakdown(self.pricer.system(fold.header), self.pricer.tools(fold.header), fold.total)

    def _projection(self, session: Session) -> _Projection:
        state = self._projections.get(session)
        if state is None:
            state = self._projections[session] = _Projection()
        log = session_log(session)
        for index in range(state.consumed, len(session.events)):
            try:
                self._project(state, log[index])
            except InvalidEventError as exc:
                raise exc.locate(session_id=session.id, seq=index, event_type=log[index].type) from None
            state.consumed = index + 1
        return state

    def _project(self, state: _Projection, event: Event) -> None:
        """The shadow-price protocol: a price is kept for exactly one following event (E6)."""
        pending, kind, op = state.pending, event.type, event.surface_op
        if kind in (COMPACTION_SUMMARY, COMPACTION_PRUNE):
            state.pending = _claimed_price(event)
            return
        if isinstance(op, Replace):
            delta = 0
            if pending is not None and pending[2] == event.seq - 1:
                _check_claim(pending[0], op, event)
                delta = self.pricer.event(event) - pending[1]
            state.surface += delta
        elif op is not None:
            state.surface += self.pricer.event(event)
        if kind == ASSISTANT_MESSAGE:
            usage = _get(event.data, "usage")
            if isinstance(usage, dict):
                prompt = (_count(usage, "inputTokens") + _count(usage, "cacheReadTokens")
                          + _count(usage, "cacheWriteTokens"))
                state.sample = (prompt, state.surface - self.pricer.event(event))
        state.pending = None


_FOLDED: Final = frozenset({REQUEST_HEADER, STEP_START, STEP_END, ASSISTANT_MESSAGE})


def _same_header(anchor_header: Any, effective: Any) -> bool:
    if anchor_header is None or effective is None:
        return anchor_header is None and effective is None
    return header_equals(anchor_header, effective)


def _reassemble(blocks: dict[int, list[Any]], chunk: Any) -> None:
    """Add one stream chunk to the blocks being rebuilt: ``index -> [kind, texts, name]``."""
    kind, index = _get(chunk, "type"), _get(chunk, "index")
    if type(index) is not int:
        return
    if kind in ("text-delta", "reasoning-delta"):
        text = chunk.get("text")
        block = blocks.setdefault(index, ["text" if kind == "text-delta" else "reasoning", [], None])
        if type(text) is str:
            block[1].append(text)
    elif kind == "tool-call-delta":
        block = blocks.setdefault(index, ["tool-call", [], None])
        if type(chunk.get("name")) is str:
            block[2] = chunk["name"]
        if type(chunk.get("argumentsDelta")) is str:
            block[1].append(chunk["argumentsDelta"])


def _block(parts: list[Any]) -> dict[str, Any]:
    kind, texts, name = parts
    if kind == "tool-call":
        return {"type": "tool-call", "name": name or "", "arguments": "".join(texts)}
    return {"type": kind, "text": "".join(texts)}


def _claimed_price(event: Event) -> tuple[tuple[int, ...], int, int] | None:
    seqs, tokens = _get(event.data, "shadowedSeqs"), _get(event.data, "shadowedTokenCount")
    if not isinstance(seqs, tuple) or not seqs or type(tokens) is not int:
        raise InvalidEventError(f"{event.type} lacks shadowedSeqs or shadowedTokenCount")
    return seqs, tokens, event.seq


def _check_claim(claimed: tuple[int, ...], op: Replace, event: Event) -> None:
    cited = set(event.source_event_seqs or ())
    if claimed[0] != op.start or claimed[-1] != op.end or not cited.issuperset(claimed):
        raise InvalidEventError(
            f"replace {op.start}..{op.end} follows a price for a different span "
            f"({claimed[0]}..{claimed[-1]})"
        )


def session_log(session: Session) -> list[Event]:
    """The session's own event list (packed rows expanded), for O(new) index reads (never mutated here)."""
    return session._resolved_log()

