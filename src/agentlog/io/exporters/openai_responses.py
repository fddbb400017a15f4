"""``openai-responses``: a Responses API request body, ``client.responses.create(model=..., **body)``.

``input`` items (exactly the logged items where a message's shells still fit, every call
answered), ``instructions`` (the header's system prompt) and function ``tools`` from the latest
request header, as the adapter builds them. Default view: ``surface`` (the next request).
"""

from __future__ import annotations

from agentlog.core.jsonvalue import dumps_indented
from agentlog.integrations.responses_items import responses_request
from agentlog.io.exporters.source import ExportSource

__all__ = ["openai_responses"]


def openai_responses(source: ExportSource) -> bytes:
    """``{"input": [...], "instructions", "tools"}`` (the last two only when present) as indented JSON."""
    body = responses_request(source.session(), source.messages("surface"))
    return dumps_indented(source.finish(body))
