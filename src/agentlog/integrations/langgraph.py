"""LangGraph checkpointer on an agentlog store: ``AgentlogSaver``, a ``BaseCheckpointSaver``.

One thread is one agentlog session; each checkpoint, each task's pending writes and each
removal is an event in it (``agentlog.integrations.langgraph_records``), so every past checkpoint
stays readable and ``copy_thread`` is the store's fork (O(1) on backends that share prefixes).
A list channel that grows (``add_messages``) is logged as its new items only: storage grows
with the conversation, not with its square. Works over every store URL (``jsonl:``,
``sqlite:``, ``postgresql:``, ``memory:``); with ``durable=True`` each call returns once its
event is on disk, so a SIGKILL loses no checkpoint LangGraph was told is saved.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import random
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any, Final

from agentlog.errors import (
    AgentlogError,
    MissingExtraError,
    SessionLockedError,
    SessionNotFoundError,
    UsageError,
)
from agentlog.integrations.langgraph_index import ThreadIndex
from agentlog.integrations.langgraph_records import (
    CHECKPOINT,
    REMOVED,
    WRITES,
    blob_record,
    checkpoint_record,
    removed_record,
    writes_record,
)
from agentlog.store.base import Store
from agentlog.store.urls import open_store
from agentlog.store.writer import LiveSession

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        DeltaChannelHistory,
        get_checkpoint_id,
        get_checkpoint_metadata,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol

    from agentlog.integrations.langgraph_messages import OpenCalls, log_messages, new_messages
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "agentlog.integrations.langgraph needs LangGraph: pip install 'agentlog[langgraph]'"
    ) from exc

__all__ = ["AgentlogSaver"]

PRUNE_STRATEGIES: Final = ("keep_latest", "delete")
DURABILITY_KEY: Final = "__pregel_durability"
"""Where LangGraph puts a run's ``durability`` (``sync``, ``async``, ``exit``) in a saver call's config."""
RUNTIME_KEY: Final = "__pregel_runtime"
"""Present in the config of every saver call a graph run makes (absent from a direct call)."""
logger = logging.getLogger("agentlog")


@dataclass(slots=True)
class _Thread:
    """A thread's session (``live`` is None when read without its writer lock) and its index."""

    live: LiveSession | None
    index: ThreadIndex
    open_calls: OpenCalls | None = None
    """Tool calls of the logged messages not answered yet (None: not read from the surface yet)."""


class AgentlogSaver(BaseCheckpointSaver[str]):
    """LangGraph's checkpointer protocol on any agentlog store, sync and async.

    ``store`` is a ``Store`` or a store URL (then this saver owns and closes it). A thread's
    session is opened, holding its writer lock, the first time the saver writes or reads it, and
    stays open until ``close()`` (the ``max_threads`` most recently used are kept). A thread
    another process holds is read without its lock. Calls run one at a time. With ``messages``
    (the default) the LangChain messages a root checkpoint adds are also logged as agentlog
    turns (``agentlog.integrations.langgraph_messages``).
    """

    def __init__(self, store: Store | str, *, serde: SerializerProtocol | None = None, durable: bool = True,
                 messages: bool = True, max_threads: int = 64) -> None:
        super().__init__(serde=serde)
        self.messages = messages
        self._owns_store = isinstance(store, str)
        self.store: Store = open_store(store) if isinstance(store, str) else store
        self.durable = durable
        self.max_threads = max_threads
        self._threads: OrderedDict[str, _Thread] = OrderedDict()
        self._lock = threading.RLock()
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Flush and release every thread's session (and the store of a URL); idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                while self._threads:
                    self._evict(next(iter(self._threads)))
            finally:
                if self._owns_store:
                    self.store.close()

    def __enter__(self) -> AgentlogSaver:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> AgentlogSaver:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await asyncio.to_thread(self.close)

    def get_next_version(self, current: str | None, channel: None = None) -> str:
        """A zero-padded counter with a random tail, so two branches of a thread (time travel) never
        share a version: ``000000000007.3f2a9c01b4de``."""
        number = 0 if current is None else int(str(current).split(".")[0])
        return f"{number + 1:012}.{random.getrandbits(48):012x}"

    # -- threads -----------------------------------------------------------------------------

    def _thread(self, thread_id: str, *, create: bool) -> _Thread | None:
        """The thread's session, opened for writing (or created); None when it does not exist."""
        if self._closed:
            raise UsageError("this AgentlogSaver is closed", session_id=thread_id)
        known = self._threads.get(thread_id)
        if known is not None:
            self._threads.move_to_end(thread_id)
            return known
        try:
            live = self.store.open(thread_id)
        except SessionNotFoundError:
            if not create:
                return None
            live = self.store.start(thread_id)
        except SessionLockedError:
            if create:
                raise
            return self._view(thread_id)
        thread = _Thread(live, ThreadIndex.of(thread_id, live.session.events))
        self._threads[thread_id] = thread
        while len(self._threads) > max(1, self.max_threads):
            self._evict(next(iter(self._threads)))
        return thread

    def _view(self, thread_id: str) -> _Thread | None:
        """The thread as held (if this saver has it) or as stored, read without taking its lock."""
        known = self._threads.get(thread_id)
        if known is not None:
            return known
        try:
            events = self.store.inspect(thread_id).events
        except SessionNotFoundError:
            return None
        return _Thread(None, ThreadIndex.of(thread_id, events))

    def _writable(self, thread_id: str, *, create: bool = False) -> _Thread | None:
        thread = self._thread(thread_id, create=create)
        if thread is not None and thread.live is None:
            raise SessionLockedError("another writer holds this thread's session; it can only be read",
                                     session_id=thread_id)
        return thread

    def _evict(self, thread_id: str) -> None:
        thread = self._threads.pop(thread_id, None)
        if thread is not None and thread.live is not None:
            thread.live.close()

    def _log(self, thread: _Thread, kind: str, data: dict[str, Any], *, flush: bool = True) -> None:
        """Append one ignorable event, fold it into the index, and make it durable (with ``flush``;
        else it goes with the next flush, or the store's write-behind).

        A failed flush drops the thread's session unflushed: the next call reopens what is on
        disk, so a put that raised is not seen by later reads.
        """
        live = thread.live
        assert live is not None
        event = live.session.append(kind, data, ignorable=True)
        thread.index.add(kind, event.data)
        if self.durable and flush:
            try:
                live.flush()
            except BaseException:
                self._threads.pop(live.id, None)
                live.abandon()
                raise

    def _thread_ids(self) -> builtins.list[str]:
        with_held = {header.id for header in self.store.list()} | set(self._threads)
        return sorted(with_held)

    # -- reading -----------------------------------------------------------------------------

    def _tuple(self, thread_id: str, index: ThreadIndex, record: Mapping[str, Any],
               metadata: dict[str, Any] | None = None) -> CheckpointTuple:
        fields, stored_metadata = index.decoded(record, self.serde)
        ns, checkpoint_id, parent = record["ns"], record["id"], record["parent"]
        checkpoint: Any = {**fields, "channel_values": index.channel_values(ns, fields["channel_versions"],
                                                                            self.serde)}
        return CheckpointTuple(
            config=_config(thread_id, ns, checkpoint_id),
            checkpoint=checkpoint,
            metadata=metadata if metadata is not None else stored_metadata,  # type: ignore[arg-type]
            parent_config=None if parent is None else _config(thread_id, ns, parent),
            pending_writes=index.pending_writes(ns, checkpoint_id, self.serde),
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint the config names (its ``checkpoint_id``, else the namespace's latest)."""
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        with self._lock:
            thread = self._thread(thread_id, create=False)
            if thread is None:
                return None
            record = thread.index.find(configurable.get("checkpoint_ns", ""), get_checkpoint_id(config))
            return None if record is None else self._tuple(thread_id, thread.index, record)

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of the config's thread (and namespace, and id) or of every thread."""
        with self._lock:
            found = self._listed(config, filter, before, limit)
        yield from found

    def _listed(self, config: RunnableConfig | None, wanted: dict[str, Any] | None,
                before: RunnableConfig | None, limit: int | None) -> builtins.list[CheckpointTuple]:
        configurable = config["configurable"] if config else {}
        ns = configurable.get("checkpoint_ns")
        only_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        thread_ids = [str(configurable["thread_id"])] if "thread_id" in configurable else self._thread_ids()
        found: builtins.list[CheckpointTuple] = []
        for thread_id in thread_ids:
            thread = self._thread(thread_id, create=False) if config else self._view(thread_id)
            if thread is None:
                continue
            for record in thread.index.newest_first(ns):
                if limit is not None and len(found) >= limit:
                    return found
                if (only_id is not None and record["id"] != only_id) or (
                        before_id is not None and record["id"] >= before_id):
                    continue
                metadata = thread.index.decoded(record, self.serde)[1]
                if wanted and not all(metadata.get(key) == value for key, value in wanted.items()):
                    continue
                found.append(self._tuple(thread_id, thread.index, record, metadata))
        return found

    def get_delta_channel_history(self, *, config: RunnableConfig,
                                  channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        """The base class's parent-chain walk, through removed checkpoints too: ``prune`` and
        ``delete_for_runs`` hide checkpoints, the log keeps what a ``DeltaChannel`` rebuilds from."""
        configurable = config["configurable"]
        ns = configurable.get("checkpoint_ns", "")
        collected: dict[str, builtins.list[Any]] = {channel: [] for channel in channels}
        seeds: dict[str, Any] = {}
        remaining = set(channels)
        with self._lock:
            thread = self._thread(str(configurable["thread_id"]), create=False) if channels else None
            index = thread.index if thread is not None else None
            target = index.find(ns, get_checkpoint_id(config)) if index is not None else None
            parent = target["parent"] if target is not None else None
            while index is not None and parent is not None and remaining:
                record = index.ancestor(ns, parent)
                if record is None:
                    break
                for write in reversed(index.pending_writes(ns, parent, self.serde, removed=True)):
                    if write[1] in remaining:
                        collected[write[1]].append(write)
                versions = index.decoded(record, self.serde)[0]["channel_versions"]
                for channel, value in index.channel_values(ns, versions, self.serde, remaining).items():
                    seeds[channel] = value
                    remaining.discard(channel)
                parent = record["parent"]
        history: dict[str, DeltaChannelHistory] = {}
        for channel in channels:
            history[channel] = {"writes": collected[channel][::-1]}
            if channel in seeds:
                history[channel]["seed"] = seeds[channel]
        return history

    # -- writing -----------------------------------------------------------------------------

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        """Log a checkpoint with the values of the channels in ``new_versions``; durable on return."""
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        values = checkpoint["channel_values"]
        with self._lock:
            thread = self._writable(thread_id, create=True)
            assert thread is not None
            index = thread.index
            written = index.written(ns, configurable.get("checkpoint_id"))  # what made this checkpoint
            bases = {channel: index.base_for(ns, channel, version, values.get(channel))
                     for channel, version in new_versions.items()}
            blobs = [blob_record(channel, version, values, self.serde, bases[channel], written)
                     for channel, version in new_versions.items()]
            logged = self._log_messages(thread, blobs, values, bases) if self.messages and ns == "" else []
            self._log(thread, CHECKPOINT, checkpoint_record(
                ns, checkpoint, configurable.get("checkpoint_id"), get_checkpoint_metadata(config, metadata),
                blobs, self.serde, logged))
            for channel, version in new_versions.items():
                if channel in values:
                    index.remember(ns, channel, version, values[channel])
        return _config(thread_id, ns, checkpoint["id"])

    def _log_messages(self, thread: _Thread, blobs: builtins.list[dict[str, Any]], values: Mapping[str, Any],
                      bases: Mapping[str, tuple[Any, builtins.list[Any]] | None]) -> builtins.list[str]:
        """Log the LangChain messages the changed list channels gained; their ids (those that have one)."""
        index, live = thread.index, thread.live
        assert live is not None
        fresh: builtins.list[Any] = []
        for blob in blobs:
            value, base = values.get(blob["channel"]), bases[blob["channel"]]
            if type(value) is list:  # an extension's items only: the rest was seen with its base
                start = len(base[1]) if "base" in blob and base is not None else 0
                fresh += new_messages(value[start:], index.logged)
        if not fresh:
            return []
        try:
            thread.open_calls = log_messages(live.session, fresh, thread.open_calls)
        except AgentlogError as exc:
            logger.warning('session "%s": LangGraph messages not logged as agentlog turns: %s', live.id, exc)
            thread.open_calls = None
            return []
        return [message.id for message in fresh if message.id is not None]

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        """Log a task's writes to a checkpoint; a repeated (task, index) is not logged twice."""
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns, checkpoint_id = configurable.get("checkpoint_ns", ""), configurable["checkpoint_id"]
        indexed = [(WRITES_IDX_MAP.get(channel, position), channel, value)
                   for position, (channel, value) in enumerate(writes)]
        with self._lock:
            thread = self._writable(thread_id, create=True)
            assert thread is not None
            fresh = thread.index.fresh_writes(ns, checkpoint_id, task_id, indexed)
            if fresh:
                record = writes_record(ns, checkpoint_id, task_id, task_path, fresh, self.serde)
                # durability="async": LangGraph does not wait for a task's writes; they become
                # durable with the checkpoint that follows (an error, interrupt or resume at once)
                deferred = (_durability(configurable) == "async"
                            and all(index >= 0 for index, _channel, _value in fresh))
                self._log(thread, WRITES, record, flush=not deferred)

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's session; copies made from it by ``copy_thread`` become full copies first."""
        thread_id = str(thread_id)
        with self._lock:
            self._evict(thread_id)
            try:
                self.store.delete(thread_id)
            except SessionNotFoundError:
                return
            except UsageError:
                for header in self.store.list():
                    if header.parent_session == thread_id:
                        self._evict(header.id)
                        self.store.materialize(header.id)
                self.store.delete(thread_id)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread to a new one: the store's fork of its session."""
        source, target = str(source_thread_id), str(target_thread_id)
        with self._lock:
            if self._view(source) is None:
                return
            if self._view(target) is not None:
                raise UsageError(f"cannot copy thread {source!r}: thread {target!r} already exists",
                                 session_id=target)
            live = self.store.fork(source, None, target)
            self._threads[target] = _Thread(live, ThreadIndex.of(target, live.session.events))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Take the checkpoints whose metadata ``run_id`` is in ``run_ids`` out of view, in every thread."""
        runs = set(run_ids)
        if not runs:
            return
        with self._lock:
            for thread_id in self._thread_ids():
                view = self._view(thread_id)
                if view is None:
                    continue
                doomed = [(record["ns"], record["id"]) for record in view.index.newest_first(None)
                          if view.index.decoded(record, self.serde)[1].get("run_id") in runs]
                if doomed:
                    self._remove(thread_id, doomed, "delete_for_runs")

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: each namespace's latest checkpoint alone stays in view; ``delete``: delete."""
        if strategy not in PRUNE_STRATEGIES:
            raise ValueError(f"unknown prune strategy {strategy!r} (expected keep_latest or delete)")
        with self._lock:
            for thread_id in map(str, thread_ids):
                if strategy == "delete":
                    self.delete_thread(thread_id)
                    continue
                view = self._view(thread_id)
                if view is None:
                    continue
                doomed = [(ns, checkpoint_id) for ns, space in view.index.checkpoints.items()
                          for checkpoint_id in sorted(space)[:-1]]
                if doomed:
                    self._remove(thread_id, doomed, "prune")

    def _remove(self, thread_id: str, doomed: builtins.list[tuple[str, str]], reason: str) -> None:
        thread = self._writable(thread_id)
        if thread is not None:
            self._log(thread, REMOVED, removed_record(doomed, reason))

    # -- async twins: the same calls in a worker thread ----------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None,
                    ) -> AsyncIterator[CheckpointTuple]:
        def listed() -> builtins.list[CheckpointTuple]:
            with self._lock:
                return self._listed(config, filter, before, limit)

        for found in await asyncio.to_thread(listed):
            yield found

    async def aget_delta_channel_history(self, *, config: RunnableConfig,
                                         channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        walk = partial(self.get_delta_channel_history, config=config, channels=channels)
        return await asyncio.to_thread(walk)

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


def _durability(configurable: Mapping[str, Any]) -> str:
    """The durability of the run making this call: LangGraph's default (``async``) when a run does
    not name one, ``sync`` for a call made outside a graph run (nothing follows it)."""
    named = configurable.get(DURABILITY_KEY)
    if isinstance(named, str):
        return named
    return "async" if RUNTIME_KEY in configurable else "sync"
