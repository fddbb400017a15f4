"""agentlog: crash-safe, event-sourced sessions for LLM agents.

The public API lives here and only here; submodules are implementation.
"""

from agentlog.errors import (
    AgentlogError,
    CompactionError,
    ConcurrentWriterError,
    ForkError,
    InvalidEventError,
    InvalidHeaderError,
    InvariantError,
    PersistenceIOError,
    SessionCorruptionError,
    SessionExistsError,
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionNotFoundError,
    StoreError,
    SurfaceError,
    UsageError,
)
from agentlog.events import KNOWN_EVENT_TYPES, SURFACE_TYPES, Event, Replace, SurfaceOp
from agentlog.fork import fork
from agentlog.header import FORMAT_VERSION, SessionHeader
from agentlog.invariants import InvariantChecker, check_invariants
from agentlog.jsonvalue import FrozenDict, freeze, is_json_value, thaw
from agentlog.messages import Message, derive_event_message, transcript
from agentlog.recorder import Recorder, Step, Turn
from agentlog.repair import interrupted_turn_closers
from agentlog.request_header import canonical_header, fold_request_header, header_equals
from agentlog.session import EventsView, Session
from agentlog.store.base import Inspection, RawArtifact, Snapshot, Store
from agentlog.store.jsonl import JsonlStore
from agentlog.store.memory import MemoryStore
from agentlog.store.urls import open_store
from agentlog.store.writer import LiveSession
from agentlog.surface import (
    Replacement,
    Surface,
    SurfaceFold,
    fold_surface,
    is_append_surface_event,
    is_replacement_surface_event,
    is_surface_event,
)

__version__ = "0.1.0"

__all__ = [
    "FORMAT_VERSION",
    "KNOWN_EVENT_TYPES",
    "SURFACE_TYPES",
    "AgentlogError",
    "CompactionError",
    "ConcurrentWriterError",
    "Event",
    "EventsView",
    "ForkError",
    "FrozenDict",
    "Inspection",
    "InvalidEventError",
    "InvalidHeaderError",
    "InvariantChecker",
    "InvariantError",
    "JsonlStore",
    "LiveSession",
    "MemoryStore",
    "Message",
    "PersistenceIOError",
    "RawArtifact",
    "Recorder",
    "Replace",
    "Replacement",
    "Session",
    "SessionCorruptionError",
    "SessionExistsError",
    "SessionFormatUnsupportedError",
    "SessionHeader",
    "SessionLockedError",
    "SessionNotFoundError",
    "Snapshot",
    "Step",
    "Store",
    "StoreError",
    "Surface",
    "SurfaceError",
    "SurfaceFold",
    "SurfaceOp",
    "Turn",
    "UsageError",
    "__version__",
    "canonical_header",
    "check_invariants",
    "derive_event_message",
    "fold_request_header",
    "fold_surface",
    "fork",
    "freeze",
    "header_equals",
    "interrupted_turn_closers",
    "is_append_surface_event",
    "is_json_value",
    "is_replacement_surface_event",
    "is_surface_event",
    "open_store",
    "thaw",
    "transcript",
]
