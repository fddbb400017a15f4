"""``agentlog serve``: a local, read-only web viewer of a store (extra ``web``).

``create_app(store, token=None)`` is an ASGI app: sessions (``/``), one session with its
transcript beside its surface (``/s/<id>``), its event inspector (``/events/<id>``) and its
live feed (``/live/<id>``, server-sent events). Nothing here writes to the store.
"""

from __future__ import annotations

from agentlog.web.app import create_app

__all__ = ["create_app"]
