"""``anthropic``: a Messages API request body, ``client.messages.create(model=..., max_tokens=..., **body)``.

``system``, ``messages`` (``tool_use``/``tool_result`` blocks, every call answered, thinking
kept where its signature makes it replayable, roles alternating) and ``tools``, as the adapter
builds them. Default view: ``surface`` (exactly ``anthropic_request(session)``).
"""

from __future__ import annotations

from agentlog.core.jsonvalue import dumps_indented
from agentlog.integrations.anthropic_request import anthropic_request
from agentlog.io.exporters.source import ExportSource

__all__ = ["anthropic"]


def anthropic(source: ExportSource) -> bytes:
    """The request body as indented JSON."""
    body = anthropic_request(source.session(), source.messages("surface"))
    return dumps_indented(source.finish(body))
