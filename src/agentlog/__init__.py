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
from agentlog.header import FORMAT_VERSION, SessionHeader
from agentlog.jsonvalue import FrozenDict, freeze, is_json_value, thaw
from agentlog.messages import Message, derive_event_message, transcript
from agentlog.request_header import canonical_header, fold_request_header, header_equals
from agentlog.session import EventsView, Session
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
    "InvalidEventError",
    "InvalidHeaderError",
    "InvariantError",
    "Message",
    "PersistenceIOError",
    "Replace",
    "Replacement",
    "Session",
    "SessionCorruptionError",
    "SessionExistsError",
    "SessionFormatUnsupportedError",
    "SessionHeader",
    "SessionLockedError",
    "SessionNotFoundError",
    "StoreError",
    "Surface",
    "SurfaceError",
    "SurfaceFold",
    "SurfaceOp",
    "UsageError",
    "__version__",
    "canonical_header",
    "derive_event_message",
    "fold_request_header",
    "fold_surface",
    "freeze",
    "header_equals",
    "is_append_surface_event",
    "is_json_value",
    "is_replacement_surface_event",
    "is_surface_event",
    "thaw",
    "transcript",
]
