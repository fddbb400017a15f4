"""asyncio, imported when first used: with ssl it is 3 MB of the 48 MB a resumed T = 1000 session
takes, and a synchronous program never needs it (an event loop that runs has imported it already)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:
    import asyncio

P = ParamSpec("P")
T = TypeVar("T")


async def in_thread(function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``asyncio.to_thread``: run a blocking call without blocking the event loop."""
    import asyncio

    return await asyncio.to_thread(function, *args, **kwargs)


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, None outside one."""
    module = sys.modules.get("asyncio")
    if module is None:
        return None  # never imported: no loop can be running
    try:
        loop: asyncio.AbstractEventLoop = module.get_running_loop()
    except RuntimeError:
        return None
    return loop


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run``: run a coroutine to completion on a new event loop (none may be running)."""
    import asyncio

    return asyncio.run(coroutine)


def is_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is asyncio's ``CancelledError`` (never, while asyncio is not imported)."""
    module = sys.modules.get("asyncio")
    return module is not None and isinstance(exc, module.CancelledError)
