"""An exception as the LlmFailure a turn or step logs: ``{message, code, status?, ...}``.

Pure, so the recorder, the provider adapters and the compactor (which asks whether a failure is
a context overflow) read one mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentlog.core.events import is_safe_int
from agentlog.core.jsonvalue import FrozenDict, frozen_dict, frozen_object, valid_text
from agentlog.errors import InvalidEventError

__all__ = ["clean_text", "llm_failure"]


def clean_text(text: str) -> str:
    """Text made safe to log (lone surrogates escaped): closing a turn must not fail on it."""
    return text if text.isascii() or valid_text(text) else text.encode("utf-8", "backslashreplace").decode()


def _attr(obj: object, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def llm_failure(exc: BaseException) -> FrozenDict:
    """The LlmFailure ``{message, code, status?, providerRetryAfterMs?, requestId?}`` of an exception.

    An ``llm_failure`` mapping on the exception wins; else ``code``/``status`` (or
    ``status_code``)/``request_id``/``provider_retry_after_ms`` attributes; else code ``UNKNOWN``.
    """
    provided = _attr(exc, "llm_failure")
    if isinstance(provided, Mapping):
        try:
            failure = frozen_object(provided, "error")
        except InvalidEventError:
            failure = None
        if failure is not None and type(failure.get("message")) is str and type(failure.get("code")) is str:
            return failure
    code = _attr(exc, "code")
    if type(code) is str and code:
        parts: dict[str, Any] = {"message": clean_text(str(exc) or type(exc).__name__),
                                 "code": clean_text(code)}
    else:
        text = str(exc)
        parts = {"message": clean_text(f"{type(exc).__name__}: {text}" if text else type(exc).__name__),
                 "code": "UNKNOWN"}
    status = _attr(exc, "status")
    status = status if is_safe_int(status) else _attr(exc, "status_code")
    if is_safe_int(status):
        parts["status"] = status
    retry = _attr(exc, "provider_retry_after_ms")
    if is_safe_int(retry) and retry >= 0:
        parts["providerRetryAfterMs"] = retry
    request_id = _attr(exc, "request_id")
    if type(request_id) is str and request_id:
        parts["requestId"] = clean_text(request_id)
    return frozen_dict(parts)
