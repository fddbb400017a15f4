"""The viewer on a free loopback port in a thread of the test process (uvicorn), and the browser."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from agentlog.store.base import Store
from agentlog.web import create_app

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(store: Store, *, token: str | None = None, index_in_background: bool = True) -> Iterator[str]:
    """Serve ``store`` on 127.0.0.1; yields the base URL (``http://127.0.0.1:PORT``)."""
    port = free_port()
    app = create_app(store, token=token, index_in_background=index_in_background)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the viewer did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def ensure_chromium() -> str:
    """Debian's chromium (Playwright cannot download its own build here)."""
    if not os.path.exists(CHROMIUM) and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], check=False, capture_output=True)
    return CHROMIUM


def launch(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=ensure_chromium(), args=CHROMIUM_ARGS)
