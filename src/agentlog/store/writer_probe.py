"""Who is writing a session right now: read the writer lock's holder without taking the lock.

``verify`` uses it to tell a turn another process is recording from a crashed writer's. A
lock is never taken, not even a shared one: that would make a writer's ``LOCK_EX|LOCK_NB``
(or ``pg_try_advisory_lock``) fail while we look.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentlog.store.base import Store

__all__ = ["writer_pid"]


def writer_pid(store: Store, session_id: str) -> int | None:
    """The pid of the process holding ``session_id``'s writer lock, None when no process does.

    File stores read the kernel's lock table for the lock file, PostgreSQL reads ``pg_locks``
    (the pid the holder's lock connection names, on whatever host it runs). Raises ``OSError``
    when this cannot be told (the kernel's lock table cannot be read: not Linux).
    """
    if session_id in store._live:
        return os.getpid()
    return store._writer_pid(session_id)
