"""What a LangGraph thread's events say now: a fold over its ``langgraph/*`` events.

The index keeps the checkpoints in view per namespace, the pending writes of each, and every
channel blob ever logged (removed checkpoints keep their blobs: a later value may extend them).
It rebuilds a channel value from its chain of list extensions and keeps the last one it built
per channel, so the next checkpoint can be logged as that value plus its new items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from agentlog.core.bulk import gc_paused
from agentlog.core.events import Event
from agentlog.errors import SessionCorruptionError
from agentlog.integrations.langgraph_records import (
    CHECKPOINT,
    EVENT_TYPES,
    REMOVED,
    WRITES,
    Serde,
    decode_payload,
    extends,
    from_plain_or_serde,
)

__all__ = ["KEPT_VALUES", "ThreadIndex"]

KEPT_VALUES: Final = 4
"""List values kept per channel (each a list of references to shared objects, no copies of them)."""

WriteEntry = tuple[str, int, str, Any, str]
"""task id, index, channel, payload, task path."""


class ThreadIndex:
    """The checkpoints, writes and blobs of one thread's session, updated event by event."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.checkpoints: dict[str, dict[str, Mapping[str, Any]]] = {}
        self.writes: dict[tuple[str, str], dict[tuple[str, int], WriteEntry]] = {}
        self.blobs: dict[tuple[str, str, Any], Mapping[str, Any]] = {}
        self.values: dict[tuple[str, str], list[tuple[Any, list[Any]]]] = {}
        """The last ``KEPT_VALUES`` list values built or stored per (namespace, channel), newest last,
        with their versions: the bases a new value may extend (a time-travel branch extends an old one)."""
        self.logged: set[str] = set()
        """Ids of the LangChain messages already logged as agentlog messages."""
        self.hidden: dict[tuple[str, str], tuple[Mapping[str, Any], dict[tuple[str, int], WriteEntry]]] = {}
        """Removed checkpoints and their writes: out of view, still on a delta channel's parent chain."""

    @classmethod
    def of(cls, session_id: str, events: Iterable[Event]) -> ThreadIndex:
        """The index of a whole log (events of other types are skipped)."""
        index = cls(session_id)
        with gc_paused():  # a cold open parses every event: without it, full collections dominate
            for event in events:
                if event.type in EVENT_TYPES:
                    index.add(event.type, event.data)
        return index

    def add(self, kind: str, data: Mapping[str, Any]) -> None:
        """Fold one ``langgraph/*`` event's data in."""
        if kind == CHECKPOINT:
            ns = data["ns"]
            self.checkpoints.setdefault(ns, {})[data["id"]] = data
            for blob in data["blobs"]:
                self.blobs[(ns, blob["channel"], blob["version"])] = blob
            self.logged.update(data.get("messages", ()))
        elif kind == WRITES:
            stored = self.writes.setdefault((data["ns"], data["checkpoint"]), {})
            for index, channel, payload in data["writes"]:
                key = (data["task"], index)
                if index < 0 or key not in stored:  # special channels (error, interrupt) are replaced
                    stored[key] = (data["task"], index, channel, payload, data["path"])
        elif kind == REMOVED:
            for ns, checkpoint_id in data["checkpoints"]:
                record = self.checkpoints.get(ns, {}).pop(checkpoint_id, None)
                writes = self.writes.pop((ns, checkpoint_id), {})
                if record is not None:
                    self.hidden[(ns, checkpoint_id)] = (record, writes)

    # -- reading -----------------------------------------------------------------------------

    def find(self, ns: str, checkpoint_id: str | None) -> Mapping[str, Any] | None:
        """The checkpoint ``checkpoint_id`` of ``ns``, or its latest (the greatest id) when None."""
        in_ns = self.checkpoints.get(ns)
        if not in_ns:
            return None
        if checkpoint_id is None:
            return in_ns[max(in_ns)]
        return in_ns.get(checkpoint_id)

    def newest_first(self, ns: str | None) -> list[Mapping[str, Any]]:
        """Every checkpoint in view (of ``ns``, or of all namespaces), greatest id first."""
        spaces = self.checkpoints.values() if ns is None else [self.checkpoints.get(ns, {})]
        records = [record for space in spaces for record in space.values()]
        records.sort(key=lambda record: record["id"], reverse=True)
        return records

    def fresh_writes(self, ns: str, checkpoint_id: str, task_id: str,
                     writes: Iterable[tuple[int, str, Any]]) -> list[tuple[int, str, Any]]:
        """The writes not logged yet: a repeated ``(task, index)`` is idempotent, special ones replace."""
        stored = self.writes.get((ns, checkpoint_id), {})
        return [(index, channel, value) for index, channel, value in writes
                if index < 0 or (task_id, index) not in stored]

    def ancestor(self, ns: str, checkpoint_id: str) -> Mapping[str, Any] | None:
        """A checkpoint in view or removed from it (a parent chain runs through both)."""
        record = self.checkpoints.get(ns, {}).get(checkpoint_id)
        if record is None and (ns, checkpoint_id) in self.hidden:
            return self.hidden[(ns, checkpoint_id)][0]
        return record

    def written(self, ns: str, checkpoint_id: str | None) -> dict[tuple[str, bytes], list[Any]]:
        """The serde ``(type, bytes)`` of a checkpoint's writes (in view) -> ``[checkpoint, task, index]``."""
        stored = self.writes.get((ns, checkpoint_id), {}) if checkpoint_id is not None else {}
        return {decode_payload(entry[3]): [checkpoint_id, entry[0], entry[1]] for entry in stored.values()
                if entry[1] >= 0}

    def written_payload(self, ns: str, where: Sequence[Any]) -> Any:
        """The payload of the write ``[checkpoint, task, index]`` names (in view or removed)."""
        checkpoint_id, task, index = where
        writes = self.writes.get((ns, checkpoint_id))
        if writes is None and (ns, checkpoint_id) in self.hidden:
            writes = self.hidden[(ns, checkpoint_id)][1]
        entry = (writes or {}).get((task, index))
        if entry is None:
            raise SessionCorruptionError(
                f"a langgraph channel value names write {index} of task {task!r} at checkpoint "
                f"{checkpoint_id!r} (namespace {ns!r}), which the log does not hold",
                session_id=self.session_id)
        return entry[3]

    def pending_writes(self, ns: str, checkpoint_id: str, serde: Serde, *,
                       removed: bool = False) -> list[tuple[str, str, Any]]:
        """The checkpoint's writes in ``writes_sort_key`` order (task path, task id, index);
        ``removed``: also those of a checkpoint taken out of view."""
        writes = self.writes.get((ns, checkpoint_id))
        if writes is None and removed and (ns, checkpoint_id) in self.hidden:
            writes = self.hidden[(ns, checkpoint_id)][1]
        stored = sorted((writes or {}).values(), key=lambda entry: (entry[4], entry[0], entry[1]))
        return [(task, channel, serde.loads_typed(decode_payload(payload)))
                for task, _index, channel, payload, _path in stored]

    def channel_values(self, ns: str, versions: Mapping[str, Any], serde: Serde,
                       only: Iterable[str] | None = None) -> dict[str, Any]:
        """The channel values at ``versions`` (of the ``only`` channels; those without a value left out)."""
        values: dict[str, Any] = {}
        wanted = versions.items() if only is None else [(ch, versions[ch]) for ch in only if ch in versions]
        for channel, version in wanted:
            blob = self.blobs.get((ns, channel, version))
            if blob is None or not blob.keys() & {"value", "base"}:
                continue
            values[channel] = self.value(ns, channel, version, serde)
        return values

    def kept(self, ns: str, channel: str, version: Any) -> list[Any] | None:
        """The list value of ``version`` if it is kept (shared: never mutate)."""
        for kept_version, value in self.values.get((ns, channel), ()):
            if kept_version == version:
                return value
        return None

    def base_for(self, ns: str, channel: str, version: Any, value: Any) -> tuple[Any, list[Any]] | None:
        """The longest kept value (of another version) that ``value`` extends, or None.

        Longest first, so a turn usually pays one prefix test (each is as long as the history)."""
        for kept in sorted(self.values.get((ns, channel), ()), key=lambda entry: len(entry[1]), reverse=True):
            if kept[0] != version and extends(value, kept[1]):
                return kept
        return None

    def value(self, ns: str, channel: str, version: Any, serde: Serde) -> Any:
        """One channel's value at ``version``: its snapshot plus every extension after it, in order."""
        cached = self.kept(ns, channel, version)
        if cached is not None:
            return list(cached)
        parts: list[Any] = []
        at = version
        while True:
            blob = self.blobs.get((ns, channel, at))
            if blob is None or len(parts) > len(self.blobs):
                raise SessionCorruptionError(
                    f"langgraph channel {channel!r} (namespace {ns!r}) version {version!r} extends "
                    f"version {at!r}, which the log does not hold whole", session_id=self.session_id)
            if "base" not in blob:
                base = serde.loads_typed(decode_payload(blob["value"]))
                break
            parts.append(blob["items"] if "items" in blob else self.written_payload(ns, blob["itemsOf"]))
            at = blob["base"]
            known = self.kept(ns, channel, at)
            if known is not None:
                base = known
                break
        if not parts and type(base) is not list:
            return base
        value = list(base)
        for part in reversed(parts):
            value.extend(serde.loads_typed(decode_payload(part)))
        self._keep(ns, channel, version, value)
        return list(value)

    def remember(self, ns: str, channel: str, version: Any, value: Any) -> None:
        """Keep a list value just logged, so the next checkpoint can extend it."""
        if type(value) is list:
            self._keep(ns, channel, version, list(value))

    def _keep(self, ns: str, channel: str, version: Any, value: list[Any]) -> None:
        kept = [entry for entry in self.values.get((ns, channel), ()) if entry[0] != version]
        kept.append((version, value))
        self.values[(ns, channel)] = kept[-KEPT_VALUES:]

    def decoded(self, record: Mapping[str, Any], serde: Serde) -> tuple[dict[str, Any], dict[str, Any]]:
        """A checkpoint record's fields (without values) and metadata."""
        return (from_plain_or_serde(record["checkpoint"], serde),
                from_plain_or_serde(record["metadata"], serde))
